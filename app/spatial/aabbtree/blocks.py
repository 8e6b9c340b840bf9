"""Leaf-contiguous object storage of the dynamic AABB tree: one block per node in a packed heap.

Every node's own objects lie together: positions ``start[n] .. start[n] + count[n] - 1`` of
the heap hold the node's slots (``slot``) and their spheres as float32 structure of arrays
(``x, y, z, r, vd``, as :mod:`app.spatial.scan` reads them), so a partly visible node is the
branch-free scan of one range and a node inside the view emits one range of slots with no
test. ``pos[s]`` is slot s's position and ``node[s]`` its node. The float32 copy is written
when an object is placed or moves; the float64 store stays the contract's truth (the scan
decides again in float64 whatever float32 cannot).

Blocks come in power-of-two sizes ("classes", 2^MIN_CLASS positions and up). A node's block
doubles when it fills and halves when it falls to a quarter (if there is room); an emptied
block is given back. Blocks are taken from a free list per class, or from the heap's top; a
split takes its children's blocks from the top, side by side, so siblings' objects are
adjacent. When there is no room, a kernel stops before it changes anything for the object at
hand and asks for ``meta[META_NEED]`` positions; the tree then repacks the heap
(:func:`repacked`: every block in depth-first order, free space at the end) and calls the
kernel again from where it stopped. A repack also restores tree order after long churn.

A free block's first position links the free list: ``slot[start] = -(next + 3)`` (``next``
-1 at the end), so it is never -1, which marks an unused position.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import njit

from app.spatial.scan import to32

MIN_CLASS = 2  # the smallest block: 4 positions
NCLASS = 40
META_TOP = 0  # meta[0]: first position above every block (the heap's used part)
META_NEED = 1  # meta[1]: positions a stopped kernel asked for (0: none)

Objects = namedtuple("AABBObjects",
                     ["node", "pos", "slot", "x", "y", "z", "r", "vd", "free", "meta"])
AABBObjects = Objects  # (numba's cache pickles the class by name: see kernels.Nodes)


# ---------------------------------------------------------------------- arrays (numpy)

def _heap_arrays(length: int) -> tuple[np.ndarray, ...]:
    """slot, x, y, z, r, vd of an empty heap; every page written now (np.full), so no frame
    pays the page faults of a fresh mapping."""
    return (np.full(length, -1, np.int32), np.full(length, 0, np.float32),
            np.full(length, 0, np.float32), np.full(length, 0, np.float32),
            np.full(length, -np.inf, np.float32), np.full(length, np.inf, np.float32))


def new_objects(capacity: int, heap: int = 1024) -> Objects:
    """Storage for ``capacity`` slots (none placed) and an empty heap of ``heap`` positions."""
    return Objects(np.full(capacity, -1, np.int32), np.full(capacity, -1, np.int32),
                   *_heap_arrays(heap), np.full(NCLASS, -1, np.int64), np.zeros(2, np.int64))


def grow_slots(ob: Objects, capacity: int) -> Objects:
    """``ob`` with room for ``capacity`` slots (the new ones placed nowhere)."""
    node = np.full(capacity, -1, np.int32)
    pos = np.full(capacity, -1, np.int32)
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
def top_room(ob, size: int) -> bool:
    """``size`` positions fit above the top; if not, ask for them (meta[META_NEED])."""
    if ob.meta[META_TOP] + size <= ob.slot.shape[0]:
        return True
    ob.meta[META_NEED] = max(ob.meta[META_NEED], size)
    return False


@njit(cache=True, _nrt=False)
def take_top(ob, size: int) -> int:
    """``size`` positions above the top (the caller checked :func:`top_room`)."""
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
def take_exact(ob, c: int) -> int:
    """A block of class c from its own free list, else from the top (what
    :func:`room_for_blocks` counts on)."""
    if ob.free[c] >= 0:
        return pop_free(ob, c)
    return take_top(ob, 1 << c)


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

@njit(cache=True, _nrt=False)
def write_record(ob, p: int, s: int, centers, radii, vdist) -> None:
    """Put slot s at position p with its sphere's float32 copy."""
    ob.slot[p] = s
    ob.x[p] = to32(centers[s, 0])
    ob.y[p] = to32(centers[s, 1])
    ob.z[p] = to32(centers[s, 2])
    ob.r[p] = to32(radii[s])
    ob.vd[p] = to32(vdist[s])
    ob.pos[s] = p


@njit(cache=True, _nrt=False)
def write_centre(ob, p: int, s: int, centers) -> None:
    """Rewrite the float32 centre at slot s's position p (radius and view distance kept)."""
    ob.x[p] = to32(centers[s, 0])
    ob.y[p] = to32(centers[s, 1])
    ob.z[p] = to32(centers[s, 2])


@njit(cache=True, _nrt=False)
def move_record(ob, dst: int, src: int) -> None:
    """Move the record at position src to dst (src becomes unused)."""
    s = ob.slot[src]
    ob.slot[dst] = s
    ob.x[dst] = ob.x[src]
    ob.y[dst] = ob.y[src]
    ob.z[dst] = ob.z[src]
    ob.r[dst] = ob.r[src]
    ob.vd[dst] = ob.vd[src]
    ob.pos[s] = dst
    ob.slot[src] = -1


# ---------------------------------------------------------------------- a node's block

@njit(cache=True, _nrt=False)
def resize_block(nd, ob, n: int, c: int) -> None:
    """Move node n's objects into a new block of class c (the caller checked can_take)."""
    b = take_block(ob, c)
    old = nd.start[n]
    for i in range(nd.count[n]):
        move_record(ob, b + i, old + i)
    if nd.cap[n] > 0:
        give_block(ob, old, nd.cap[n])
    nd.start[n] = b
    nd.cap[n] = 1 << c


@njit(cache=True, _nrt=False)
def reserve_block(nd, ob, n: int, total: int) -> bool:
    """Make node n's block hold ``total`` objects at once (a batch about to land there: one
    move instead of a doubling per power of two); False, with the room asked for, if the
    heap lacks it."""
    if nd.cap[n] >= total:
        return True
    c = block_class(total)
    if not can_take(ob, c):
        ob.meta[META_NEED] = max(ob.meta[META_NEED], 1 << c)
        return False
    resize_block(nd, ob, n, c)
    return True


@njit(cache=True, _nrt=False)
def grown_class(nd, n: int) -> int:
    """The class node n's block moves to when it is full (or the smallest, for none)."""
    return MIN_CLASS if nd.cap[n] == 0 else block_class(2 * nd.cap[n])


@njit(cache=True, _nrt=False)
def room_to_add(nd, ob, n: int) -> bool:
    """Node n (-1: a leaf about to be made) can take one more object; if not, the room it
    needs is asked for (meta[META_NEED]) and nothing changes."""
    if n >= 0 and nd.count[n] < nd.cap[n]:
        return True
    c = MIN_CLASS if n < 0 else grown_class(nd, n)
    if can_take(ob, c):
        return True
    ob.meta[META_NEED] = max(ob.meta[META_NEED], 1 << c)
    return False


@njit(cache=True, _nrt=False)
def add_to_node(nd, ob, n: int, s: int, centers, radii, vdist) -> None:
    """Append slot s to node n's block from the float64 store (the caller checked
    :func:`room_to_add`)."""
    if nd.count[n] == nd.cap[n]:
        resize_block(nd, ob, n, grown_class(nd, n))
    write_record(ob, nd.start[n] + nd.count[n], s, centers, radii, vdist)
    nd.count[n] += 1
    ob.node[s] = n


@njit(cache=True, _nrt=False)
def remove_at(nd, ob, n: int, p: int) -> None:
    """Take position p out of node n's block: the block's last record fills the gap. An
    emptied block is given back; one left a quarter full moves to half its size if a block
    is at hand (never asks for room: shrinking can wait)."""
    last = nd.start[n] + nd.count[n] - 1
    if p != last:
        move_record(ob, p, last)
    else:
        ob.slot[p] = -1
    nd.count[n] -= 1
    cnt = nd.count[n]
    if cnt == 0:
        give_block(ob, nd.start[n], nd.cap[n])
        nd.start[n] = -1
        nd.cap[n] = 0
    elif cnt * 4 <= nd.cap[n] and nd.cap[n] > (1 << MIN_CLASS):
        c = block_class(nd.cap[n] // 2)
        if can_take(ob, c):
            resize_block(nd, ob, n, c)


@njit(cache=True, _nrt=False)
def move_to_node(nd, ob, d: int, s: int, centers, radii, vdist) -> None:
    """Move slot s from its node to node d (the caller checked :func:`room_to_add` for d):
    added first, so that the removal's shrink cannot take the room the add was promised."""
    x = ob.node[s]
    p = ob.pos[s]
    add_to_node(nd, ob, d, s, centers, radii, vdist)
    remove_at(nd, ob, x, p)


@njit(cache=True, _nrt=False)
def drop_slot(nd, ob, s: int) -> None:
    """Take slot s out of its node's block and forget its place."""
    remove_at(nd, ob, ob.node[s], ob.pos[s])
    ob.node[s] = -1
    ob.pos[s] = -1


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
                out.x[q] = ob.x[old + i]
                out.y[q] = ob.y[old + i]
                out.z[q] = ob.z[old + i]
                out.r[q] = ob.r[old + i]
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


@njit(cache=True, _nrt=False)
def room_for_blocks(ob, sizes) -> bool:
    """Blocks for objects counted in ``sizes`` (0: no block) can all be taken, from the free
    lists or the top; if not, the room they need is asked for and nothing changes."""
    top = 0
    for i in range(sizes.shape[0]):
        if sizes[i] == 0:
            continue
        c = block_class(sizes[i])
        # The free list of class c serves as many blocks as it holds: walk that far. The
        # blocks are then taken with take_exact (no halving), as counted here.
        same = 0
        for j in range(i):
            same += sizes[j] > 0 and block_class(sizes[j]) == c
        b = ob.free[c]
        while b >= 0 and same > 0:
            b = -ob.slot[b] - 3
            same -= 1
        if b < 0:
            top += 1 << c
    return top == 0 or top_room(ob, top)
