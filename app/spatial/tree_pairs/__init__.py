"""The pair descent of a tree snapshot: every touching pair of a tree's objects, whatever
the tree (the AABB tree and the view distance tree both build a :class:`TreePairSnapshot`
from their own nodes and hand it to :func:`snapshot_pairs`).

A snapshot is a tree in depth-first order with exact boxes: every node's objects packed into
one array (centre, radius, slot), so that a node's own objects are one contiguous range and so
is its whole subtree, and the descent reads spheres sequentially instead of chasing linked
lists through a store; besides the subtree box it keeps the box of each node's *own* objects
(tight for the big objects a non-leafy tree keeps at inner nodes). An own list longer than
REFINE_ABOVE (an unsplittable leaf, a crowd of big objects at an inner node, a view-distance
class of the viewdist tree, its unbounded list) is refined in the snapshot only into a kd
subtree cut along the Morton curve, so the descent never meets a long list.

:func:`snapshot_pairs` descends (explicit stack, no recursion). An *item* is either a node's
subtree or a node's own object list (the list acts as a leaf). ``self(n)`` tests n's own list
against itself and against every child subtree, recurses into each child and pairs every two
children whose boxes are within the margin; ``pair(x, y)`` of two items whose boxes overlap
(grown by the margin) splits the bigger subtree into its own list and its children, until
both are lists, which are filtered by the other's box and tested exactly
(:func:`app.spatial.pairs.pair_touch`); small products are tested directly on the packed
ranges.

A snapshot of at least ``PARALLEL_PAIRS_MIN`` objects (:data:`app.parallelism.PARALLEL_MIN`)
is descended on every thread: self(root) is expanded breadth first into about a hundred seed
tasks per thread (independent: together they are the serial descent's task tree, so every
pair is found once), dealt out by their estimated work, and each thread descends its share
with its own stack, pending buffer and output; the outputs are concatenated. Below it the
serial driver runs (waking the workers costs ~0.2 ms).

Node pruning is conservative: boxes are grown by the margin plus a relative pad (``REL_PAD``
of the magnitudes involved) so that rounding never drops a pair the exact test keeps;
exactness rests on the per-pair test alone.

The modules, in the order a pairs query uses them:

* :mod:`.snapshot`: the snapshot, the arrays it is built in, the builders' helpers, the
  packed rows' layout, and the helpers of a per-object descent on a live tree (both trees'
  pairs of given objects use them);
* :mod:`.refine`: long own lists refined into kd subtrees along the Morton curve;
* :mod:`.descent`: the descent on one thread;
* :mod:`.parallel`: the descent on every thread, and :func:`snapshot_pairs`.
"""

from app.spatial.tree_pairs.parallel import snapshot_pairs
from app.spatial.tree_pairs.snapshot import SnapshotArena, TreePairSnapshot

__all__ = ["SnapshotArena", "TreePairSnapshot", "snapshot_pairs"]
