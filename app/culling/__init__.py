"""Culling: frustum planes, view distance, the Z-pyramid occlusion test, the per-frame pipeline.

Nothing here imports OpenGL, so culling is testable and benchmarkable on its own.
"""
