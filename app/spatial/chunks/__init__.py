"""The chunked linear layout (``chunks``): Hilbert-ordered chunks of 64 spheres under an
implicit tree of boxes, scanned branch-free inside; what engines cull with today."""

from app.spatial.chunks.index import ChunkedIndex

__all__ = ["ChunkedIndex"]
