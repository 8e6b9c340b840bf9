"""The tree's per-frame kernels as the tree calls them: the node pool, the objects, the
store's columns and the upkeep's list come as plain tuples, and each entry builds the named
tuples again inside compiled code, where that costs nothing, before calling the kernel.

Why: numba types every argument at each call, and a named tuple's arrays about twice as
slowly as a plain tuple's (the pool's 21 arrays, the objects' 8 and the store's 3: 4.7 us a
call against 2.3, ``/tmp/s/ntproto.py``). A frame calls three to five of these (the update,
the upkeep and the query; the removals and inserts when objects spawn). The hashed grid passes
plain tuples for the same reason (``hashgrid.store.grid_args``).
"""

from __future__ import annotations

from numba import njit

from app.spatial.aabbtree import batches as ba
from app.spatial.aabbtree import queries as qu
from app.spatial.aabbtree import upkeep as up
from app.spatial.aabbtree.blocks import Objects
from app.spatial.aabbtree.pool import Nodes, Pending, Spheres


@njit(cache=True)
def update_objects(nd, ob, sp, slots, new_c, new_r, new_v, keep: int) -> tuple[int, int]:
    """:func:`.batches.update_objects`."""
    return ba.update_objects(Nodes(*nd), Objects(*ob), Spheres(*sp), slots, new_c, new_r,
                             new_v, keep)


@njit(cache=True)
def maintain(nd, ob, sp, rules, budget: int, planes, pd, patience: int) -> int:
    """:func:`.upkeep.maintain`."""
    return up.maintain(Nodes(*nd), Objects(*ob), Spheres(*sp), rules, budget, planes,
                       Pending(*pd), patience)


@njit(cache=True)
def insert_objects(nd, ob, sp, slots, ids, keep: int) -> int:
    """:func:`.batches.insert_objects`."""
    return ba.insert_objects(Nodes(*nd), Objects(*ob), Spheres(*sp), slots, ids, keep)


@njit(cache=True)
def remove_objects(nd, ob, sp, slots, rules) -> None:
    """:func:`.batches.remove_objects`."""
    ba.remove_objects(Nodes(*nd), Objects(*ob), Spheres(*sp), slots, rules)


@njit(cache=True)
def query_frustum(nd, ob, sp, planes, eye, use_vd: bool, rules, catchup: int, share: float,
                  pd, codes):
    """:func:`.queries.query_frustum`."""
    return qu.query_frustum(Nodes(*nd), Objects(*ob), Spheres(*sp), planes, eye, use_vd,
                            rules, catchup, share, Pending(*pd), codes)


@njit(cache=True)
def query_frustum_occluded(nd, ob, sp, planes, eye, use_vd: bool, occ, rules, catchup: int,
                           share: float, pd, codes):
    """:func:`.queries.query_frustum_occluded`."""
    return qu.query_frustum_occluded(Nodes(*nd), Objects(*ob), Spheres(*sp), planes, eye,
                                     use_vd, occ, rules, catchup, share, Pending(*pd), codes)
