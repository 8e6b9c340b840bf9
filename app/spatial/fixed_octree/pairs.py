"""Collision pairs of the fixed octree: Nevala's "intersection with a list of objects".

All pairs (the article's ``GetIntersection``, made exact)
    From the root down, each node gets a list of objects from outside its subtree that may
    touch it: its own objects are tested against each other and against that list, and each
    child is handed the list plus the node's own objects, kept only where their box (grown
    by the margin) overlaps the child's subtree box. The article stops there, which misses
    pairs across two sibling subtrees (spheres touching across the shared face, or within
    the margin of it): here a child's list also takes the objects of its siblings handled
    before it that reach its box (found by descents pruned with the subtree boxes), so a
    pair is tested exactly once: where its deeper member lives, with the other in the list.
    Subtree boxes are recomputed exactly per query (:func:`subtree_boxes`, one pass): the
    tree's own bounds only grow and swell to the node cubes when everything moves.
    Crowded nodes are swept: a big cube's straddlers lie on its three mid-planes with no
    order among them (5 % of a uniform scene sits at the root), so a node whose own x (own
    + list) work exceeds :data:`SWEEP_FROM` sorts them along a direction perpendicular to no
    axis and no axis-aligned plane and tests only the pairs whose projections overlap.
    Elsewhere a node's own objects meet the list and each other in vectorised distance
    windows (a branch-free test over contiguous spheres, then the exact test on its hits).
    The lists live in one stack-shaped buffer of packed spheres (one array per field): a
    node's list, its own objects right after it (so "list + own" is one contiguous range),
    then its children's lists; popping a node drops everything above its list.

Pairs of given objects (the article's "only moved objects")
    Per given object, one descent from the root with its sphere's box grown by the margin;
    a pair of two given objects is kept from the lower slot's side. With a large share of
    the objects given, the all-pairs walk with the per-slot filter is cheaper.

Pending inserts are flushed first (the class's ``_sync``), as for every query.
The kernels that walk never grow a buffer: they write the rows that fit and return, and the
driver grows the pair (or list) buffer and resumes with the node (or given object) that did
not fit, from its start. A kernel that reassigns its arrays pays reference counting in its
inner loops and loses their vectorisation (~10x, see hashgrid/pairs.py).
"""

from __future__ import annotations

import numpy as np
from numba import njit

# The vectorised window and the exact test on its hits are shared with the grid: the same
# packed spheres, one array per field.
from app.spatial.pair_windows import emit, grown_to, window
from app.spatial.pairs import pair_touch

_EPS = 1e-9  # relative slack of box overlaps (rounding never drops a pair)
#: Absolute slack: below ~1.5e-154 the squares of the exact test underflow, so it accepts
#: spheres that far apart whatever their radii.
_TINY = 1e-150
#: Sweep a node's own objects and handed-down list (instead of testing every pair in
#: vectorised windows) once own x (own + list) exceeds this; below it sorting costs more
#: (uniform 10^4 and 10^5, all moving: 512 -> 4.5 / 57 ms, 32768 -> 3.4 / 44, never 3.8 / 68).
SWEEP_FROM = 32768
#: The sweep's direction: unit, and perpendicular to no axis and no axis-aligned plane.
_DIR = np.array([1.0, 1.2, 1.45]) / np.sqrt(1.0 + 1.2**2 + 1.45**2)
#: With at least this fraction of the objects given, the filtered all-pairs walk is cheaper
#: than one descent per given object: each descent tests every object of the crowded nodes
#: on its way (measured, uniform and all moving: even at 10^4 (5 %), 10^5 (1.6 %)).
ALL_PAIRS_FROM = 1.0 / 64.0




def new_lists(capacity: int) -> tuple[np.ndarray, ...]:
    """The list buffer: packed spheres (x, y, z, r, grown half-side, slot) and a byte each
    for the window tests."""
    n = max(int(capacity), 64)
    return (np.empty(n), np.empty(n), np.empty(n), np.empty(n), np.empty(n),
            np.empty(n, dtype=np.int64), np.empty(n, dtype=np.uint8))


@njit(cache=True)
def _grown_lists(lists, need):
    """The list buffer copied into one of at least ``need`` entries (doubling)."""
    cap = lists[0].shape[0]
    while cap < need:
        cap = 2 * cap + 64
    old = lists[0].shape[0]
    lx = np.empty(cap)
    ly = np.empty(cap)
    lz = np.empty(cap)
    lr = np.empty(cap)
    lg = np.empty(cap)
    ls = np.empty(cap, dtype=np.int64)
    lx[:old] = lists[0]
    ly[:old] = lists[1]
    lz[:old] = lists[2]
    lr[:old] = lists[3]
    lg[:old] = lists[4]
    ls[:old] = lists[5]
    return lx, ly, lz, lr, lg, ls, np.empty(cap, dtype=np.uint8)


@njit(cache=True, inline="always")
def _grow(x, y, z, r, margin):
    """Half-side of a sphere's box grown by the margin, padded against rounding."""
    g = r + margin
    return g + _EPS * (abs(x) + abs(y) + abs(z) + g) + _TINY


@njit(cache=True, inline="always")
def _node_pairs(s0, s1, o1, lists, spheres, margin, sel, out, k):
    """Own objects [s1, o1) against each other and against the list [s0, s1) of ``lists``
    (``spheres``: its x, y, z, r arrays, built once by the caller), at out[k:] as far as
    they fit; returns k plus the number of pairs."""
    lx, ly, lz, lr, _lg, ls, hit = lists
    filtered = sel.shape[0] > 0
    for i in range(s1, o1):
        ax = lx[i]
        ay = ly[i]
        az = lz[i]
        ar = lr[i]
        a = ls[i]
        fa = filtered and not sel[a]
        nh = window(lx, ly, lz, lr, i + 1, o1, ax, ay, az, ar + margin, hit)  # own, after
        if nh:
            k = emit((a, ax, ay, az, ar, fa), i + 1, nh, spheres, ls, hit, margin, sel, out, k)
        nh = window(lx, ly, lz, lr, s0, s1, ax, ay, az, ar + margin, hit)  # handed down
        if nh:
            k = emit((a, ax, ay, az, ar, fa), s0, nh, spheres, ls, hit, margin, sel, out, k)
    return k


@njit(cache=True)
def _crowded_pairs(s0, s1, o1, lists, margin, sel, out, k):
    """:func:`_node_pairs` by a sort-and-sweep along :data:`_DIR`: an own object's window
    is every entry that starts after it and before it ends, a handed-down object's only the
    own objects that do (the pairs of two handed-down objects are tested where one of them
    lives); each window (a binary search) gets the vectorised distance test and its hits
    the exact one (|d . (c_a - c_b)| <= |c_a - c_b|; the ends are padded by each sphere's
    scale). Returns the end of the rows, as far as they fit."""
    lx, ly, lz, lr, _lg, ls, _hit = lists
    m = o1 - s0
    key = np.empty(m)
    for t in range(m):
        i = s0 + t
        key[t] = (_DIR[0] * lx[i] + _DIR[1] * ly[i] + _DIR[2] * lz[i]
                  - _grow(lx[i], ly[i], lz[i], lr[i], 0.0))
    order = np.argsort(key)
    sx = np.empty(m)
    sy = np.empty(m)
    sz = np.empty(m)
    sr = np.empty(m)
    lo = np.empty(m)
    hi = np.empty(m)
    ss = np.empty(m, dtype=np.int64)
    own = np.empty(m, dtype=np.bool_)
    for t in range(m):
        i = s0 + order[t]
        sx[t] = lx[i]
        sy[t] = ly[i]
        sz[t] = lz[i]
        sr[t] = lr[i]
        lo[t] = key[order[t]]
        hi[t] = (_DIR[0] * lx[i] + _DIR[1] * ly[i] + _DIR[2] * lz[i]
                 + _grow(lx[i], ly[i], lz[i], lr[i], margin))
        ss[t] = ls[i]
        own[t] = i >= s1
    # the own objects again, apart, in the same order (the handed-down ones' windows)
    no = o1 - s1
    ox = np.empty(no)
    oy = np.empty(no)
    oz = np.empty(no)
    orr = np.empty(no)
    olo = np.empty(no)
    osl = np.empty(no, dtype=np.int64)
    after = np.empty(m, dtype=np.int64)  # own objects at sorted positions <= t
    q = 0
    for t in range(m):
        if own[t]:
            ox[q] = sx[t]
            oy[q] = sy[t]
            oz[q] = sz[t]
            orr[q] = sr[t]
            olo[q] = lo[t]
            osl[q] = ss[t]
            q += 1
        after[t] = q
    filtered = sel.shape[0] > 0
    hit = np.empty(m, dtype=np.uint8)
    sorted_spheres = (sx, sy, sz, sr)  # emit's views, built once
    own_spheres = (ox, oy, oz, orr)
    for i in range(m):
        a = ss[i]
        ax = sx[i]
        ay = sy[i]
        az = sz[i]
        ar = sr[i]
        fa = filtered and not sel[a]
        if own[i]:
            j1 = np.searchsorted(lo, hi[i], side="right")
            nh = window(sx, sy, sz, sr, i + 1, j1, ax, ay, az, ar + margin, hit)
            if nh:
                k = emit((a, ax, ay, az, ar, fa), i + 1, nh, sorted_spheres, ss, hit, margin,
                         sel, out, k)
        else:
            q0 = after[i]
            q1 = np.searchsorted(olo, hi[i], side="right")
            nh = window(ox, oy, oz, orr, q0, q1, ax, ay, az, ar + margin, hit)
            if nh:
                k = emit((a, ax, ay, az, ar, fa), q0, nh, own_spheres, osl, hit, margin, sel,
                         out, k)
    return k


@njit(cache=True)
def subtree_boxes(root, nd, en, box, order, stack):
    """Exact AABB of each non-empty subtree's spheres into ``box[n]`` (lo xyz, hi xyz), each
    sphere padded by its scale: a preorder into ``order``, then children before parents.
    The tree's own subtree bounds only ever grow, so when everything moves they swell to
    the node cubes, sibling boxes touch along every face and nothing prunes; these are
    tight at the cost of one pass."""
    node = nd.node
    sph = en.sphere
    enext = en.next
    m = 0
    stack[0] = root
    top = 1
    while top > 0:
        top -= 1
        n = stack[top]
        order[m] = n
        m += 1
        for c in range(8):
            ch = node[n].child[c]
            if ch >= 0 and node[ch].subcount > 0:
                stack[top] = ch
                top += 1
    for i in range(m - 1, -1, -1):
        n = order[i]
        lx = ly = lz = np.inf
        hx = hy = hz = -np.inf
        e = node[n].head
        while e >= 0:
            r = sph[e]
            g = _grow(r.cx, r.cy, r.cz, r.radius, 0.0)
            lx = min(lx, r.cx - g)
            ly = min(ly, r.cy - g)
            lz = min(lz, r.cz - g)
            hx = max(hx, r.cx + g)
            hy = max(hy, r.cy + g)
            hz = max(hz, r.cz + g)
            e = enext[e]
        for c in range(8):
            ch = node[n].child[c]
            if ch >= 0 and node[ch].subcount > 0:
                lx = min(lx, box[ch, 0])
                ly = min(ly, box[ch, 1])
                lz = min(lz, box[ch, 2])
                hx = max(hx, box[ch, 3])
                hy = max(hy, box[ch, 4])
                hz = max(hz, box[ch, 5])
        box[n, 0] = lx
        box[n, 1] = ly
        box[n, 2] = lz
        box[n, 3] = hx
        box[n, 4] = hy
        box[n, 5] = hz
    return m


@njit(cache=True, inline="always")
def _child_list(ch, s0, o1, sibs, nsib, node, en, box, margin, lists, w, stack):
    """Child ``ch``'s list written from ``w`` into ``lists``: the entries of [s0, o1) that
    reach its box (branch-free: room for all of them is checked first), then the objects of
    its earlier siblings' subtrees ``sibs[:nsib]`` that reach it (descents pruned with the
    subtree boxes), as far as they fit. Returns the end (past the buffer: grow and redo)."""
    lx, ly, lz, lr, lg, ls, _hit = lists
    sph, enext, eslot = en.sphere, en.next, en.slot
    cap = lx.shape[0]
    b0 = box[ch, 0]
    b1 = box[ch, 1]
    b2 = box[ch, 2]
    b3 = box[ch, 3]
    b4 = box[ch, 4]
    b5 = box[ch, 5]
    if w + (o1 - s0) > cap:
        return w + (o1 - s0) + nsib  # (at least that much room is needed)
    for j in range(s0, o1):
        x = lx[j]
        y = ly[j]
        z = lz[j]
        g = lg[j]
        keep = (x + g >= b0) & (x - g <= b3) & (y + g >= b1) & (y - g <= b4) & (
            z + g >= b2) & (z - g <= b5)
        lx[w] = x
        ly[w] = y
        lz[w] = z
        lr[w] = lr[j]
        lg[w] = g
        ls[w] = ls[j]
        w += np.int64(keep)
    # the margin plus rounding slack of the box's scale: subtree boxes grown by it
    gm = margin + _EPS * (abs(b0) + abs(b1) + abs(b2) + abs(b3) + abs(b4) + abs(b5)
                          + margin) + _TINY
    for i in range(nsib):
        stack[0] = sibs[i]
        top = 1
        while top > 0:
            top -= 1
            n = stack[top]
            if (box[n, 3] + gm < b0 or box[n, 0] - gm > b3 or box[n, 4] + gm < b1
                    or box[n, 1] - gm > b4 or box[n, 5] + gm < b2 or box[n, 2] - gm > b5):
                continue
            e = node[n].head
            while e >= 0:
                r = sph[e]
                x = r.cx
                y = r.cy
                z = r.cz
                g = _grow(x, y, z, r.radius, margin)
                if (x + g >= b0 and x - g <= b3 and y + g >= b1 and y - g <= b4
                        and z + g >= b2 and z - g <= b5):
                    if w < cap:
                        lx[w] = x
                        ly[w] = y
                        lz[w] = z
                        lr[w] = r.radius
                        lg[w] = g
                        ls[w] = eslot[e]
                    w += 1
                e = enext[e]
            for c in range(8):
                gc = node[n].child[c]
                if gc >= 0 and node[gc].subcount > 0:
                    stack[top] = gc
                    top += 1
    return w


@njit(cache=True)
def _walk(node, en, box, margin, sel, sweep_from, lists, frames, top, stack, out, k):
    """The traversal of :func:`all_pairs` from its stack of ``frames`` (node, list start,
    list end: three arrays). Returns (k, top, need_list, need_out): both needs 0 when done;
    else the node on top of the stack needs that much room (list entries, output rows) and
    is done again from the start once the caller has grown the buffer.

    It never grows a buffer itself: a kernel that reassigns its arrays does not get its
    window loops vectorised and pays reference counting in every inner loop (~10x)."""
    lx, ly, lz, lr, lg, ls, _hit = lists
    spheres = (lx, ly, lz, lr)  # the window's packed spheres, built once
    sph, enext, eslot = en.sphere, en.next, en.slot
    fnode, fs0, fs1 = frames
    cap = lx.shape[0]
    sibs = np.empty(8, dtype=np.int64)
    while top > 0:
        n = fnode[top - 1]
        s0 = fs0[top - 1]
        s1 = fs1[top - 1]
        rec = node[n]
        cnt = rec.count
        o1 = s1 + cnt
        if o1 > cap:
            return k, top, o1, 0
        e = rec.head
        i = s1
        while e >= 0:  # own objects packed right after the list
            r = sph[e]
            lx[i] = r.cx
            ly[i] = r.cy
            lz[i] = r.cz
            lr[i] = r.radius
            lg[i] = _grow(r.cx, r.cy, r.cz, r.radius, margin)
            ls[i] = eslot[e]
            i += 1
            e = enext[e]
        k1 = k
        if cnt * (o1 - s0) > sweep_from:
            # a crowded node: a big cube's straddlers lie on its three mid-planes with no
            # order among them; swept along a direction no plane or axis is perpendicular to
            k1 = _crowded_pairs(s0, s1, o1, lists, margin, sel, out, k)
        elif cnt > 0:
            k1 = _node_pairs(s0, s1, o1, lists, spheres, margin, sel, out, k)
        if k1 > out.shape[0]:
            return k, top, 0, k1
        # children: pushed so that they pop in octant order (memory order), so the lists
        # are written from the last octant down (the first to pop must own the highest
        # list: popping a frame drops everything above its list). A child's list also takes
        # the objects of its siblings done before it that reach it: a pair across two
        # sibling subtrees is tested once, in the lower octant's subtree.
        top -= 1
        here = top  # the node's frame: its children's frames replace it
        nsib = 0
        w = o1
        for c in range(7, -1, -1):
            ch = rec.child[c]
            if ch < 0 or node[ch].subcount == 0:
                continue
            w1 = _child_list(ch, s0, o1, sibs, nsib, node, en, box, margin, lists, w, stack)
            if w1 > cap:  # drop the children pushed so far and put the node back: it is
                fnode[here] = n  # done again from the start after the buffer grew
                fs0[here] = s0
                fs1[here] = s1
                return k, here + 1, w1, 0
            sibs[nsib] = ch
            nsib += 1
            fnode[top] = ch
            fs0[top] = w
            fs1[top] = w1
            top += 1
            w = w1
        k = k1
    return k, 0, 0, 0


@njit(cache=True)
def all_pairs(root, nd, en, margin, sel, out, lists, fnode, fs0, fs1, stack, sweep_from):
    """Every pair within ``margin`` of touching, as (slot, slot) rows in ``out`` or a grown
    copy (returned cut to the pairs, with the list buffer as used: maybe grown);
    ``sel`` non-empty: only pairs with a marked member. ``lists``: :func:`new_lists`;
    ``fnode``, ``fs0``, ``fs1``, ``stack``: traversal stacks (8 per level); nodes with own x
    (own + list) above ``sweep_from`` are swept (:data:`SWEEP_FROM`)."""
    node = nd.node
    if root < 0 or node[root].subcount < 2:
        return out[:0], lists
    nnodes = node.shape[0]
    box = np.empty((nnodes, 6))
    subtree_boxes(root, nd, en, box, np.empty(nnodes, dtype=np.int64), stack)
    fnode[0] = root
    fs0[0] = 0
    fs1[0] = 0
    top = 1
    k = 0
    while True:
        k, top, need_list, need_out = _walk(node, en, box, margin, sel, sweep_from, lists,
                                            (fnode, fs0, fs1), top, stack, out, k)
        if top == 0:
            return out[:k], lists
        if need_list:
            lists = _grown_lists(lists, need_list)
        if need_out:
            out = grown_to(out, need_out)


@njit(cache=True)
def _objects_from(i0, slots, s2e, root, node, en, margin, sel, stack, out, k):
    """The pairs of the given objects slots[i0:], each by one descent with its box, kept
    from its side, at out[k:]. Returns (k, i, need): i = len(slots) when done; else object
    i's pairs did not fit (they start at k and end at need): grow and call again from i."""
    sph, enext, eslot = en.sphere, en.next, en.slot
    cap = out.shape[0]
    for i in range(i0, slots.shape[0]):
        k0 = k
        sa = slots[i]
        ea = s2e[sa]
        ax = sph[ea].cx
        ay = sph[ea].cy
        az = sph[ea].cz
        ar = sph[ea].radius
        g = _grow(ax, ay, az, ar, margin)
        stack[0] = root
        top = 1
        while top > 0:
            top -= 1
            n = stack[top]
            rec = node[n]
            lo = rec.tlo
            hi = rec.thi
            # plus the rounding slack of the subtree's own scale (its coordinates and radii)
            if (ax + g + _EPS * (abs(lo[0]) + abs(hi[0])) < lo[0]
                    or ax - g - _EPS * (abs(lo[0]) + abs(hi[0])) > hi[0]
                    or ay + g + _EPS * (abs(lo[1]) + abs(hi[1])) < lo[1]
                    or ay - g - _EPS * (abs(lo[1]) + abs(hi[1])) > hi[1]
                    or az + g + _EPS * (abs(lo[2]) + abs(hi[2])) < lo[2]
                    or az - g - _EPS * (abs(lo[2]) + abs(hi[2])) > hi[2]):
                continue
            e = rec.head
            while e >= 0:
                sb = eslot[e]
                if e != ea and (not sel[sb] or sa < sb):
                    r = sph[e]
                    if pair_touch(ax, ay, az, ar, r.cx, r.cy, r.cz, r.radius, margin):
                        if k < cap:
                            out[k, 0] = sa
                            out[k, 1] = sb
                        k += 1
                e = enext[e]
            for c in range(7, -1, -1):
                ch = rec.child[c]
                if ch >= 0 and node[ch].subcount > 0:
                    stack[top] = ch
                    top += 1
        if k > cap:
            return k0, i, k
    return k, slots.shape[0], k


@njit(cache=True)
def pairs_of(slots, s2e, root, nd, en, margin, sel, out, stack):
    """Pairs with at least one member among the distinct ``slots`` (``sel``: those marked),
    in ``out`` or a grown copy; a pair of two given objects is kept from its lower slot."""
    if root < 0:
        return out[:0]
    k = 0
    i = 0
    while True:
        k, i, need = _objects_from(i, slots, s2e, root, nd.node, en, margin, sel, stack, out,
                                   k)
        if i >= slots.shape[0]:
            return out[:k]
        out = grown_to(out, need)
