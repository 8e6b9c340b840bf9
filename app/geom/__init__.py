"""The lowest layer: the geometry every other layer shares, and nothing else.

``predicates`` holds the sphere, box, plane and ray tests whose results define every query's
answer; ``zpyramid`` the Z-pyramid (max-depth mip chain) and its conservative occlusion tests;
``decide`` the per-object and per-node culling decisions built from both; ``hashing`` the one
integer hash; ``camera`` the view and projection matrices and the frustum planes they make.
Modules here import numpy and numba (``camera`` pyrr) only, never another ``app`` package, so
that ``spatial/`` (the indexes), ``culling/`` (the per-frame pipeline) and ``scene/`` can all
stand on them.
"""
