"""The packed copy as a heap of blocks: each node's objects in one block of ``2**k`` rows.

Queries read a node's objects from its block sequentially instead of chasing its linked list
through a million-slot store. An object linked into a node is appended to the node's block at
once; a full block moves into one twice its size (the copy is amortised: each row is copied
about once), and the old block goes on the free list of its size, where the next block of that
size is taken from. A removal moves the block's last row into the hole. So the copy never
needs a whole repack to stay current: before, objects linked since the last repack were read
through the lists, and the repack of every object once they were many took 39 ms at 10^6
objects under a stream of spawns.

Blocks are handed out from the free lists first, then from the end of the rows in use
(``TREE.pend``); a batch stops before an object when the rows left could not hold the largest
growth (:func:`has_room`), and the index grows the arrays between calls.
"""

from __future__ import annotations

from numba import njit

#: The smallest block: a node's first objects take one of these.
MIN_BLOCK = 4


@njit(cache=True, _nrt=False)
def block_class(cap):
    """k with ``cap == 2**k`` (``cap`` a power of two)."""
    k = 0
    while (1 << k) < cap:
        k += 1
    return k


@njit(cache=True, _nrt=False)
def block_rows(count):
    """Rows of the block for ``count`` objects: 0, or the power of two at or above it (at
    least MIN_BLOCK). A full block of ``n`` rows moves to ``block_rows(n + 1)``: twice it."""
    if count == 0:
        return 0
    cap = MIN_BLOCK
    while cap < count:
        cap *= 2
    return cap


@njit(cache=True, _nrt=False)
def growth_rows(largest):
    """Rows one object's arrival may take past the blocks handed out, the largest block being
    ``largest`` rows: a full block's move into one twice its size."""
    return 2 * max(largest, MIN_BLOCK)


@njit(cache=True, _nrt=False)
def has_room(pk, tree):
    """The rows past the blocks handed out can hold the largest growth one object can cause."""
    t = tree[0]
    return t.pend + growth_rows(t.pmax) <= pk.slot.shape[0]


@njit(cache=True, _nrt=False)
def take_block(pk, tree, cap):
    """First row of a free block of ``cap`` rows: off its free list, else from the end (the
    caller made sure of the room, :func:`has_room`)."""
    t = tree[0]
    k = block_class(cap)
    start = pk.free[k]
    if start != -1:
        pk.free[k] = pk.slot[start]
        t.pfree -= cap
        return start
    start = t.pend
    t.pend += cap
    t.pmax = max(t.pmax, cap)
    return start


@njit(cache=True, _nrt=False)
def give_block(pk, tree, start, cap):
    """Put a block of ``cap`` rows (0: none) on its free list."""
    if cap == 0:
        return
    k = block_class(cap)
    pk.slot[start] = pk.free[k]
    pk.free[k] = start
    tree[0].pfree += cap


@njit(cache=True, inline="always")
def write_row(pk, p, cx, cy, cz, r, vd):
    """Row ``p``'s values: centre, radius and view distance (its slot is the caller's)."""
    pk.center[p, 0] = cx
    pk.center[p, 1] = cy
    pk.center[p, 2] = cz
    pk.radius[p] = r
    pk.vdist[p] = vd


@njit(cache=True, inline="always")
def move_row(ob, pk, dst, src):
    """Row ``src`` copied to row ``dst``, its slot pointed at the new row."""
    write_row(pk, dst, pk.center[src, 0], pk.center[src, 1], pk.center[src, 2],
              pk.radius[src], pk.vdist[src])
    s = pk.slot[src]
    pk.slot[dst] = s
    ob.row[s] = dst


@njit(cache=True, _nrt=False)
def move_block(nd, ob, pk, tree, node, cap):
    """Move a node's rows into a new block of ``cap`` rows and free the old one."""
    old = nd.pstart[node]
    start = take_block(pk, tree, cap)
    for i in range(nd.plen[node]):
        move_row(ob, pk, start + i, old + i)
    give_block(pk, tree, old, nd.pcap[node])
    nd.pstart[node] = start
    nd.pcap[node] = cap


@njit(cache=True, _nrt=False)
def append_row(nd, ob, pk, tree, node, s, cx, cy, cz, r, vd):
    """Write object ``s`` as its node's last row, moving the block to one twice the size
    when it is full."""
    n = nd.plen[node]
    if n == nd.pcap[node]:
        move_block(nd, ob, pk, tree, node, block_rows(n + 1))
    p = nd.pstart[node] + n
    write_row(pk, p, cx, cy, cz, r, vd)
    pk.slot[p] = s
    ob.row[s] = p
    nd.plen[node] = n + 1


@njit(cache=True, _nrt=False)
def drop_row(nd, ob, pk, node, row):
    """Remove a row from a node's block by moving the block's last row into it."""
    last = nd.pstart[node] + nd.plen[node] - 1
    if row != last:
        move_row(ob, pk, row, last)
    nd.plen[node] -= 1


@njit(cache=True, _nrt=False)
def free_node_block(nd, pk, tree, node):
    """Give back the block of a node about to be released (it holds no rows)."""
    give_block(pk, tree, nd.pstart[node], nd.pcap[node])
    nd.pcap[node] = 0
    nd.pstart[node] = 0
