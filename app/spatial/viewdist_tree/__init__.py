"""``viewdist``: Matthews' adaptive view distance tree (a variable-radius sphere octree).

Each object with a finite view distance ``vd`` is stored as its *view sphere*: centred on the
object, radius ``vd``. A node is a cube of size ``S = 2**level`` and holds the view spheres whose
centre lies in the cube (closed) and whose radius lies in the band ``[S/4, S/2]``. Smaller
spheres go to the child octant holding their centre (children are created lazily), bigger ones
to an ancestor. So the whole subtree of a node holds spheres within the node's cube expanded by
``S/2``; for any point, at most two such expanded cubes per axis (2**3 nodes per level) contain
it, which bounds the point query "which view spheres contain the eye" (a rounding pad of
~1e-9 relative makes it three per axis only within that sliver of a cell boundary). A dense
cluster farther than twice its view distances from the eye is never entered, so its size does
not change the query's cost (Matthews' promise).

Extreme levels (documented deviations from the band):

* the *finest* level is ``min_node_size`` (a power of two, an absolute size); its nodes also
  hold every sphere smaller than ``S/4`` there, down to ``vd = 0``;
* the root is chosen from the data (power-of-two size, lower corner a multiple of
  ``min_node_size`` so that every child corner is exact) and grows by doubling toward any
  sphere it cannot hold; it shrinks again when it holds nothing and has a single child.

Objects with an infinite view distance live apart in their own list and are always considered;
so do the few with a view distance or a coordinate beyond 2**60 (about 1e18), which would need
hundreds of levels.

Modules: :mod:`.store` (state as named arrays, pool growth, the placement rule, root growth),
:mod:`.heap` (the packed copy's blocks, one per node), :mod:`.refit` (the queue of nodes whose
bounds may be loose, refitted a budget a batch), :mod:`.update` (insert, in-place move,
remove, the whole rebuild after a first load), :mod:`.queries` (frustum, box, sphere, ray),
:mod:`.check` (validate) and :mod:`.tree` (the index class). Only an insert of more than a
quarter of the objects (a load) rebuilds the whole tree, so no frame stalls on upkeep.
"""

from app.spatial.viewdist_tree.tree import ViewDistanceTree

__all__ = ["ViewDistanceTree"]
