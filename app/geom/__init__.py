"""The lowest layer: compiled geometry every other layer shares, and nothing else.

``predicates`` holds the sphere, box, plane and ray tests whose results define every query's
answer; ``zpyramid`` the Z-pyramid (max-depth mip chain) and its conservative occlusion tests;
``decide`` the per-object and per-node culling decisions built from both; ``hashing`` the one
integer hash. Modules here import numpy and numba only, never another ``app`` package, so that
``spatial/`` (the indexes) and ``culling/`` (the per-frame pipeline) can both stand on them.
"""
