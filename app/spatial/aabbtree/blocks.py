"""Leaf-contiguous object storage of the dynamic AABB tree: one block per node in a packed heap.

Every node's own objects lie together: positions ``start[n] .. start[n] + count[n] - 1`` of
the heap hold the node's slots (``slot``), their ids (``ident``: a query's answer is read in
block order, not gathered from the store by slot) and their spheres in float32 (``rec[p]`` =
x, y, z, r: one 16-byte row, a quarter of a cache line; ``vd[p]`` the view distance), so a partly
visible node is the branch-free scan of one range and a node inside the view emits one range
of slots with no test. One row rather than four arrays because objects move: a move in place
writes one line instead of three, and a record that changes block moves two or three lines
instead of six. ``pos[s]`` is slot s's position and ``node[s]`` its node. The float32 copy
is written when an object is placed or moves; the float64 store stays the contract's truth
(the scan decides again in float64 whatever float32 cannot).

Blocks come in power-of-two sizes ("classes", 2^MIN_CLASS positions and up). A node's block
doubles when it fills and halves when it falls to a quarter (if there is room); an emptied
block is given back. Blocks are taken from a free list per class, else by halving a larger
free block, else from the heap's top. When there is no room, a kernel stops before it
changes anything for the object at hand and asks for ``meta[META_NEED]`` positions; the
tree then repacks the heap (:func:`repacked`: every block in depth-first order, free space
at the end) and calls the kernel again from where it stopped. A repack also restores tree
order after long churn.

A free block's first position links the free list: ``slot[start] = -(next + 3)`` (``next``
-1 at the end), so it is never -1, which marks an unused position.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import njit

from app.spatial.prefetch import prefetch
from app.spatial.scan import to32

MIN_CLASS = 2  # the smallest block: 4 positions
NCLASS = 40
META_TOP = 0  # meta[0]: first position above every block (the heap's used part)
META_NEED = 1  # meta[1]: positions a stopped kernel asked for (0: none)
NO_ROOM = -2  # take_blocks' answer when the heap lacks room

Objects = namedtuple("AABBObjects", ["node", "pos", "slot", "ident", "rec", "vd", "free",
                                     "meta"])
AABBObjects = Objects  # (numba's cache pickles the class by name: see pool.Nodes)


# ---------------------------------------------------------------------- arrays (numpy)

def _heap_arrays(length: int) -> tuple[np.ndarray, ...]:
    """slot, ident, rec, vd of an empty heap; every page written now (np.full), so no frame
    pays the page faults of a fresh mapping."""
    rec = np.full((length, 4), 0, np.float32)
    rec[:, 3] = -np.inf
    return (np.full(length, -1, np.int32), np.full(length, -1, np.int64), rec,
            np.full(length, np.inf, np.float32))


def _places(capacity: int) -> tuple[np.ndarray, np.ndarray]:
    """(node, pos) of ``capacity`` slots placed nowhere: two columns of one array, so that a
    slot's node and position share a cache line (an update reads both)."""
    place = np.full((capacity, 2), -1, np.int32)
    return place[:, 0], place[:, 1]


def new_objects(capacity: int, heap: int = 1024) -> Objects:
    """Storage for ``capacity`` slots (none placed) and an empty heap of ``heap`` positions."""
    return Objects(*_places(capacity), *_heap_arrays(heap), np.full(NCLASS, -1, np.int64),
                   np.zeros(2, np.int64))


def grow_slots(ob: Objects, capacity: int) -> Objects:
    """``ob`` with room for ``capacity`` slots (the new ones placed nowhere)."""
    node, pos = _places(capacity)
    node[: ob.node.shape[0]] = ob.node
    pos[: ob.pos.shape[0]] = ob.pos
    return ob._replace(node=node, pos=pos)


def repacked(nd, ob: Objects, extra: int) -> Objects:
    """A new heap holding every node's block in depth-first order, each the smallest class
    that holds its objects, then at least ``extra`` and the packed size again free."""
    packed = int(packed_size(nd))
    length = max(1024, packed + max(int(extra), packed) + (1 << MIN_CLASS))
    out = Objects(ob.node, ob.pos, *_heap_arrays(length), np.full(NCLASS, -1, np.int64),
                  np.zeros(2, np.int64))
    repack_into(nd, ob, out)
    return out


# ---------------------------------------------------------------------- blocks

@njit(cache=True, _nrt=False)
def block_class(n: int) -> int:
    """The smallest class whose blocks hold n positions."""
    c = MIN_CLASS
    while (1 << c) < n:
        c += 1
    return c


@njit(cache=True, _nrt=False)
def free_above(ob, c: int) -> int:
    """The smallest class >= c with a free block (-1: none)."""
    for k in range(c, NCLASS):
        if ob.free[k] >= 0:
            return k
    return -1


@njit(cache=True, _nrt=False)
def can_take(ob, c: int) -> bool:
    """A block of class c is free (or a larger one to halve) or fits above the top."""
    return free_above(ob, c) >= 0 or ob.meta[META_TOP] + (1 << c) <= ob.slot.shape[0]


@njit(cache=True, _nrt=False)
def can_take_or_ask(ob, c: int) -> bool:
    """:func:`can_take`; if not, the room is asked for (meta[META_NEED]), nothing changed."""
    if can_take(ob, c):
        return True
    ob.meta[META_NEED] = max(ob.meta[META_NEED], 1 << c)
    return False


@njit(cache=True, _nrt=False)
def take_top(ob, size: int) -> int:
    """``size`` positions above the top (the caller checked there is room)."""
    b = ob.meta[META_TOP]
    ob.meta[META_TOP] = b + size
    return b


@njit(cache=True, _nrt=False)
def pop_free(ob, c: int) -> int:
    """Take the first block off class c's free list."""
    b = ob.free[c]
    ob.free[c] = -ob.slot[b] - 3
    ob.slot[b] = -1
    return b


@njit(cache=True, _nrt=False)
def take_block(ob, c: int) -> int:
    """A block of class c (the caller checked can_take): from its free list, else by halving
    the smallest larger free block (the upper halves go on the free lists), else from the
    top. Halving lets the space that growing blocks leave behind serve smaller ones, so the
    top (and the repack that follows its end) is reached far less often."""
    k = free_above(ob, c)
    if k < 0:
        return take_top(ob, 1 << c)
    b = pop_free(ob, k)
    while k > c:
        k -= 1
        give_block(ob, b + (1 << k), 1 << k)
    return b


@njit(cache=True, _nrt=False)
def give_block(ob, b: int, cap: int) -> None:
    """Put the block at b of ``cap`` positions (all unused) on its class's free list."""
    c = block_class(cap)
    ob.slot[b] = -(ob.free[c] + 3)
    ob.free[c] = b


# ---------------------------------------------------------------------- records

# The per-object operations take the arrays they touch, not the Nodes / Objects tuples, and
# are compiled without reference counting: numba passes a tuple of arrays by value, every
# array's descriptor copied at every call, and with the tuples these calls made removing an
# object cost 600 ns instead of 250 ns (10^6 objects). The rare block moves take the tuples.

@njit(cache=True, _nrt=False)
def write_record(slot, rec, vd, pos, p: int, s: int, sp) -> None:
    """Put slot s at position p with the float32 copy of its sphere in the store ``sp``."""
    slot[p] = s
    rec[p, 0] = to32(sp.centers[s, 0])
    rec[p, 1] = to32(sp.centers[s, 1])
    rec[p, 2] = to32(sp.centers[s, 2])
    rec[p, 3] = to32(sp.radii[s])
    vd[p] = to32(sp.vdist[s])
    pos[s] = p


@njit(cache=True, _nrt=False)
def rewrite_sphere(rec, vd, p: int, cx: float, cy: float, cz: float, r: float, ov: float,
                   v: float) -> None:
    """Rewrite record row p's float32 sphere where it is, and its view distance only when it
    changed (``ov`` -> ``v``): an object that stays at its position keeps its slot and id,
    and :func:`write_record` would write those lines again and read the store's view
    distance, three more cache lines a mover (a radius in the batch: 7 lines instead of 4)."""
    rec[p, 0] = to32(cx)
    rec[p, 1] = to32(cy)
    rec[p, 2] = to32(cz)
    rec[p, 3] = to32(r)
    if ov != v:
        vd[p] = to32(v)


@njit(cache=True, _nrt=False)
def move_record(slot, ident, rec, vd, pos, dst: int, src: int) -> None:
    """Move the record at position src to dst (src becomes unused)."""
    s = slot[src]
    slot[dst] = s
    ident[dst] = ident[src]
    for a in range(4):
        rec[dst, a] = rec[src, a]
    vd[dst] = vd[src]
    pos[s] = dst
    slot[src] = -1


@njit(cache=True, _nrt=False)
def copy_record(slot, ident, rec, vd, dst: int, src: int) -> None:
    """:func:`move_record` without the slot's position: for a caller that writes every
    moved slot's place once at the end (a split's back-pointers, see split.place_later)."""
    slot[dst] = slot[src]
    ident[dst] = ident[src]
    for a in range(4):
        rec[dst, a] = rec[src, a]
    vd[dst] = vd[src]
    slot[src] = -1


@njit(cache=True, _nrt=False)
def swap_records(slot, ident, rec, vd, pos, a: int, b: int) -> None:
    """Exchange the records at positions a and b."""
    if a == b:
        return
    sa = slot[a]
    sb = slot[b]
    slot[a] = sb
    slot[b] = sa
    t = ident[a]
    ident[a] = ident[b]
    ident[b] = t
    for i in range(4):
        t = rec[a, i]
        rec[a, i] = rec[b, i]
        rec[b, i] = t
    t = vd[a]
    vd[a] = vd[b]
    vd[b] = t
    pos[sa] = b
    pos[sb] = a


@njit(cache=True, _nrt=False)
def append_record(start, count, node, slot, ident, rec, vd, pos, n: int, s: int, sp,
                  who: int) -> None:
    """Append slot s (the caller's id ``who``) to node n's block, which has room (see
    :func:`grow_block`)."""
    p = start[n] + count[n]
    write_record(slot, rec, vd, pos, p, s, sp)
    ident[p] = who
    count[n] += 1
    node[s] = n


@njit(cache=True, inline="always")
def prefetch_position(slot, ident, rec, vd, p: int) -> None:
    """Ask for heap position p's four lines (its slot, id, record and view distance) ahead
    of a move that reads or writes them: a hole, a block's last record, a block's end."""
    prefetch(slot, p)
    prefetch(ident, p)
    prefetch(rec, p)
    prefetch(vd, p)


@njit(cache=True, _nrt=False)
def cut_record(start, cap, count, slot, ident, rec, vd, pos, n: int, p: int) -> bool:
    """Take position p out of node n's block: the block's last record fills the gap. Returns
    whether the block should now be given back or halved (:func:`fit_block`)."""
    last = start[n] + count[n] - 1
    if p != last:
        move_record(slot, ident, rec, vd, pos, p, last)
    else:
        slot[p] = -1
    count[n] -= 1
    return count[n] == 0 or (count[n] * 4 <= cap[n] and cap[n] > (1 << MIN_CLASS))


# ---------------------------------------------------------------------- a node's block

@njit(cache=True, _nrt=False)
def resize_block(nd, ob, n: int, c: int) -> None:
    """Move node n's objects into a new block of class c (the caller checked can_take)."""
    slot, ident, rec, vd, pos = ob.slot, ob.ident, ob.rec, ob.vd, ob.pos
    b = take_block(ob, c)
    old = nd.start[n]
    for i in range(nd.count[n]):
        move_record(slot, ident, rec, vd, pos, b + i, old + i)
    if nd.cap[n] > 0:
        give_block(ob, old, nd.cap[n])
    nd.start[n] = b
    nd.cap[n] = 1 << c


@njit(cache=True, _nrt=False)
def move_or_ask(nd, ob, n: int, c: int) -> bool:
    """Move node n's objects to a block of class c; False, with the room asked for
    (meta[META_NEED]), if the heap lacks it."""
    if not can_take_or_ask(ob, c):
        return False
    resize_block(nd, ob, n, c)
    return True


@njit(cache=True, _nrt=False)
def reserve_block(nd, ob, n: int, total: int) -> bool:
    """Make node n's block hold ``total`` objects at once (a batch about to land there: one
    move instead of a doubling per power of two); False if the heap lacks the room."""
    return nd.cap[n] >= total or move_or_ask(nd, ob, n, block_class(total))


@njit(cache=True, _nrt=False)
def grow_block(nd, ob, n: int) -> bool:
    """Give node n's full (or missing) block room for one more: move it to a block twice its
    size (the smallest, for none). False if the heap lacks the room."""
    return move_or_ask(nd, ob, n, MIN_CLASS if nd.cap[n] == 0 else block_class(2 * nd.cap[n]))


@njit(cache=True, _nrt=False)
def room_for_leaf(ob) -> bool:
    """A new leaf's block can be had; if not, the room is asked for."""
    return can_take_or_ask(ob, MIN_CLASS)


@njit(cache=True, _nrt=False)
def make_room(nd, ob, n: int, leaf: bool) -> bool:
    """Room for one more object in node n's full block, or (``leaf``) for the block of a
    leaf about to be made under n; False, with the room asked for, if the heap lacks it.
    Callers ask only when the block is full or a leaf is new (the tuples cost a copy)."""
    return room_for_leaf(ob) if leaf else grow_block(nd, ob, n)


@njit(cache=True, _nrt=False)
def fit_block(nd, ob, n: int) -> None:
    """After :func:`cut_record` asked for it: an emptied block is given back; one left a
    quarter full moves to half its size if a block is at hand (it never asks for room:
    shrinking can wait)."""
    if nd.count[n] == 0:
        give_block(ob, nd.start[n], nd.cap[n])
        nd.start[n] = -1
        nd.cap[n] = 0
        return
    c = block_class(nd.cap[n] // 2)
    if can_take(ob, c):
        resize_block(nd, ob, n, c)


# ---------------------------------------------------------------------- repacking

@njit(cache=True)
def packed_size(nd) -> int:
    """Positions every live node's block takes when each is the smallest class that fits."""
    total = 0
    for n in range(nd.count.shape[0]):
        if nd.depth[n] >= 0 and nd.count[n] > 0:
            total += 1 << block_class(nd.count[n])
    return total


@njit(cache=True)
def repack_into(nd, ob, out) -> None:
    """Copy every node's block from ``ob`` into the empty heap ``out``, depth first (child 0
    first), and point the nodes and slots at the new positions."""
    stack = np.empty(nd.count.shape[0] + 1, np.int64)
    stack[0] = 0
    top = 1
    p = 0
    k = nd.child.shape[1]
    while top > 0:
        top -= 1
        n = stack[top]
        cnt = nd.count[n]
        if cnt > 0:
            old = nd.start[n]
            for i in range(cnt):
                s = ob.slot[old + i]
                q = p + i
                out.slot[q] = s
                out.ident[q] = ob.ident[old + i]
                for a in range(4):
                    out.rec[q, a] = ob.rec[old + i, a]
                out.vd[q] = ob.vd[old + i]
                out.pos[s] = q
            nd.start[n] = p
            nd.cap[n] = 1 << block_class(cnt)
            p += nd.cap[n]
        else:
            nd.start[n] = -1
            nd.cap[n] = 0
        if nd.nchild[n] > 0:
            for j in range(k - 1, -1, -1):
                ch = nd.child[n, j]
                if ch >= 0:
                    stack[top] = ch
                    top += 1
    out.meta[META_TOP] = p


@njit(cache=True)
def take_blocks(ob, sizes):
    """A block for each count of ``sizes`` (-1 where 0), as :func:`take_block` takes them;
    if the heap cannot give them all, none is kept, the room for all of them is asked for
    and the first entry is NO_ROOM."""
    taken = np.full(sizes.shape[0], -1, np.int64)
    for i in range(sizes.shape[0]):
        if sizes[i] == 0:
            continue
        c = block_class(sizes[i])
        if not can_take(ob, c):
            need = 0
            for j in range(sizes.shape[0]):
                if sizes[j] > 0:
                    need += 1 << block_class(sizes[j])
                if taken[j] >= 0:
                    give_block(ob, taken[j], 1 << block_class(sizes[j]))
            ob.meta[META_NEED] = max(ob.meta[META_NEED], need)
            taken[0] = NO_ROOM
            return taken
        taken[i] = take_block(ob, c)
    return taken
