"""The dynamic AABB tree's upkeep: refit and split the nodes queries noted, within a
budget of objects a frame (issue 25, item 3), so that queries stay read-only on the tree.

The paper's laziness stays: only nodes a query reached are split (:func:`maintain` takes
the ones :mod:`.queries` put on the pending list), and a big leaf beside the view is split
as if seen (:func:`near_view`).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from app.geom.predicates import OUTSIDE, box_vs_frustum6
from app.spatial.aabbtree.bounds import refit_block, refit_node
from app.spatial.aabbtree.heuristics import PAPER_LAZY
from app.spatial.aabbtree.pool import META_NFREE, META_WANT_GROW
from app.spatial.aabbtree.split import needs_split, new_later, place_later, split_limit, split_step

MIN_STEP = 256  # the least work an upkeep call does on a split under way (objects)
#: A leaf of more than GUARD_OBJECTS objects outside the view but within GUARD of its own
#: largest side of it is split as if seen (:func:`near_view`). Smaller leaves are left to
#: the paper's laziness: one stretched into the view costs a scan of a few microseconds,
#: and keeping every leaf beside the view at the threshold made the upkeep follow every
#: object that entered one (static `teleport`, kd: update 0.85 -> 1.14 ms).
GUARD = 0.125
GUARD_OBJECTS = 4096


@njit(cache=True, inline="always")
def note_node(noted, pending, npend, n: int) -> None:
    """Put node n on the upkeep's pending list (npend: its one-element count), unless it is
    there already."""
    if not noted[n]:
        noted[n] = True
        pending[npend[0]] = n
        npend[0] += 1


@njit(cache=True)
def maintain(nd, ob, sp, rules, budget: int, planes, pd, patience: int) -> int:
    """The upkeep (:func:`upkeep`), the places of the slots its splits moved written once at
    the end (:func:`.split.place_later`). Returns the objects spent."""
    later = new_later(nd.depth.shape[0])
    spent = upkeep(nd, ob, sp, rules, budget, planes, pd, patience, later)
    place_later(nd, ob, later)
    return spent


@njit(cache=True)
def upkeep(nd, ob, sp, rules, budget: int, planes, pd, patience: int, later) -> int:
    """The upkeep: refit and split the nodes queries noted, within ``budget`` objects; a
    dirty node (not overfull, no split under way) is refitted only once queries have noted
    it ``patience`` times (1: at once; at most 255), our mode only.

    Takes nodes off the pending list last-noted first (a traversal notes parents before
    children, so children are refitted before their parents read their boxes). A refit or a
    split costs the node's objects plus one; a split bigger than what is left of the budget
    (at least MIN_STEP) goes on over calls (:func:`.split.split_step`), its node put back first in
    line, so every call makes progress and none does much more than its budget. A node
    freed since it was noted, or no longer dirty nor overfull, is dropped. The children of a
    split that are overfull and not outside ``planes`` (the last frustum query's, empty
    before any) are noted in turn: the split carries on the descent that query would have
    made into them, as when queries split. A split not under way of a node the last query's
    view has left (``planes``, with the band :func:`near_view` adds) is dropped. Stops, the
    node back on the list, when a split lacks free nodes or heap room (``META_WANT_GROW``;
    the caller makes room and calls again). Returns the objects spent.
    """
    limit = split_limit(rules)
    k = nd.child.shape[1]
    noted, pending, npend, waited = pd
    lazy = (rules.flags & PAPER_LAZY) != 0
    spent = 0
    while npend[0] > 0 and spent < budget:
        n = pending[npend[0] - 1]
        if nd.depth[n] >= 0 and nd.meta[META_NFREE] < k and needs_split(nd.is_split, nd.count,
                                                                         n, limit):
            nd.meta[META_WANT_GROW] = 1
            return spent
        noted[n] = False
        npend[0] -= 1
        splitting = nd.depth[n] >= 0 and nd.kept[n] >= 0
        if nd.depth[n] < 0 or not (nd.dirty[n] or splitting
                                   or needs_split(nd.is_split, nd.count, n, limit)):
            continue
        step = max(budget - spent, MIN_STEP)
        overfull = needs_split(nd.is_split, nd.count, n, limit)
        if (overfull and not splitting and planes.shape[0] == 6
                and not (rules.flags & PAPER_LAZY)
                and not near_view(planes, nd.lo[n, 0], nd.lo[n, 1], nd.lo[n, 2], nd.hi[n, 0],
                                  nd.hi[n, 1], nd.hi[n, 2])):
            # The last query's view (and the band beside it) has left it: its split is
            # dropped, as the paper splits only what a query reaches; a query that reaches it
            # again notes it again. A turn leaves hundreds of such nodes pending (315 after
            # `turn` at 10^6, octree), and the frames after it spent their budget on them.
            overfull = False
        if (nd.dirty[n] and not splitting and not overfull and not lazy
                and waited[n] + 1 < patience):
            # Passed over: a dirty box is conservative, so it serves the queries as it is
            # until a query has noted it ``patience`` times (one a frame at most); it is
            # loose by what its objects moved since. Refitting every noted box each frame
            # cost most of a static frame's upkeep (10^6 objects, octree/leafy, `churn100`:
            # 156 refits a frame, about 100 of them parents that a child no query reaches
            # keeps dirty, refitted again at every noting).
            waited[n] += 1
            continue
        if nd.dirty[n] and not splitting and not (overfull and nd.count[n] > step):
            # (A node split over several calls is not refitted first: a refit costs all its
            # objects at once, and its stored box, loose but conservative, serves the split;
            # it is refitted when next noted, holding few objects of its own by then.)
            waited[n] = 0
            if lazy:
                refit_node(nd, ob, sp, np.int64(n), rules.threshold)
            else:
                refit_block(nd, ob, sp, np.int64(n), rules.threshold)
            spent += nd.count[n] + 1
            step = max(budget - spent, MIN_STEP)
        if splitting or overfull:
            code, used = split_step(nd, ob, sp, n, rules, step, later)
            spent += used
            if code == 1:
                _note_seen_children(nd, n, limit, planes, noted, pending, npend)
            elif code == 0 or code == 3:
                # Under way (the budget is spent) or no room in the heap: back on the list,
                # first in line, until the next call (the caller makes room first).
                note_node(noted, pending, npend, n)
                return spent
    return spent


@njit(cache=True)
def near_view(planes, lx: float, ly: float, lz: float, hx: float, hy: float,
              hz: float) -> bool:
    """Whether the box, grown by :data:`GUARD` of its largest side, is not outside
    ``planes``: a leaf in view or beside it.

    Why beside it: the paper splits only what a query reaches, and a big leaf just outside
    the view (the root's child whose corner is the eye, at 10^6 objects 124K of them) then
    stays whole until one mover stretches its box into the view; from that frame every query
    scans it, and the upkeep takes a dozen frames to split it (world at 10^6, `icoseptree`:
    working set 455 -> 124,963, frames 0.13 -> 1.5 ms). Splitting the leaves beside the view
    too, with the visible ones, leaves such a mover a small leaf to stretch. The margin is
    the leaf's own scale, so the band narrows level by level as the leaves shrink.
    Scalars, not the pool's arrays: an array argument counts references at every call.
    The caller asks it of leaves of more than :data:`GUARD_OBJECTS` objects only."""
    m = GUARD * max(hx - lx, hy - ly, hz - lz)
    return box_vs_frustum6(planes, lx - m, ly - m, lz - m, hx + m, hy + m, hz + m) != OUTSIDE


@njit(cache=True)
def _note_seen_children(nd, n: int, limit: int, planes, noted, pending, npend) -> None:
    """Note node n's overfull children not outside ``planes``, and the big ones beside them
    (:func:`near_view`)."""
    if planes.shape[0] == 0:
        return
    for j in range(nd.child.shape[1]):
        ch = nd.child[n, j]
        if ch < 0 or not needs_split(nd.is_split, nd.count, ch, limit):
            continue
        lx, ly, lz = nd.lo[ch, 0], nd.lo[ch, 1], nd.lo[ch, 2]
        hx, hy, hz = nd.hi[ch, 0], nd.hi[ch, 1], nd.hi[ch, 2]
        if box_vs_frustum6(planes, lx, ly, lz, hx, hy, hz) != OUTSIDE or (
                nd.count[ch] > GUARD_OBJECTS and near_view(planes, lx, ly, lz, hx, hy, hz)):
            note_node(noted, pending, npend, ch)
