"""``fixed-octree``: Nevala's octree over a power-of-two cube (seeds/nevala-octree.txt).

:mod:`.store` holds the state (named arrays) and root growth, :mod:`.update` the update
cycle (placement, the insert queue, moves placed at once, dead-branch lifespans),
:mod:`.queries` the frustum/box/sphere/ray queries, :mod:`.check` validate's checks,
:mod:`.octree` the class.
"""

from app.spatial.fixed_octree.octree import FixedOctree

__all__ = ["FixedOctree"]
