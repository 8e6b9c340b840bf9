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
    The lists live in one stack-shaped buffer of packed spheres: a node's list, its own
    objects right after it (so "list + own" is one contiguous range), then its children's
    lists; popping a node drops everything above its list.

Pairs of given objects (the article's "only moved objects")
    Per given object, one descent from the root with its sphere's box grown by the margin;
    a pair of two given objects is kept from the lower slot's side. With a large share of
    the objects given, the all-pairs walk with the per-slot filter is cheaper.

Pending inserts and moves are flushed first (the class's ``_sync``), as for every query.
Output rows are written where they fit and a node (or a given object) is walked again after
the buffer has grown: growing inside the inner loops cost ~10x (see hashgrid/pairs.py).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from app.spatial.pairs import pair_touch

_EPS = 1e-9  # relative slack of box overlaps (rounding never drops a pair)
#: Absolute slack: below ~1.5e-154 the squares of the exact test underflow, so it accepts
#: spheres that far apart whatever their radii.
_TINY = 1e-150
#: Sweep a node's own objects and handed-down list (instead of testing every pair) once
#: own x (own + list) exceeds this.
SWEEP_FROM = 512
#: The sweep's direction: unit, and perpendicular to no axis and no axis-aligned plane.
_DIR = np.array([1.0, 1.2, 1.45]) / np.sqrt(1.0 + 1.2**2 + 1.45**2)
#: With at least this fraction of the objects given, the filtered all-pairs walk is cheaper
#: than one descent per given object.
ALL_PAIRS_FROM = 0.25


@njit(cache=True)
def grown_to(out: np.ndarray, need: int) -> np.ndarray:
    """``out`` copied into a pair buffer of at least ``need`` rows (doubling)."""
    cap = out.shape[0]
    while cap < need:
        cap = 2 * cap + 16
    bigger = np.empty((cap, 2), dtype=np.int64)
    bigger[: out.shape[0]] = out
    return bigger


@njit(cache=True)
def _grown_list(sp, sl, need):
    """The packed spheres ``sp`` (n, 4) and their slots ``sl`` with room for ``need``."""
    cap = sp.shape[0]
    while cap < need:
        cap = 2 * cap + 64
    nsp = np.empty((cap, 4))
    nsl = np.empty(cap, dtype=np.int64)
    nsp[: sp.shape[0]] = sp
    nsl[: sl.shape[0]] = sl
    return nsp, nsl


@njit(cache=True, inline="always")
def _node_pairs(s0, s1, o1, sp, sl, margin, sel, out, k):
    """Own objects [s1, o1) against each other and against the list [s0, s1), at out[k:] as
    far as they fit; returns k plus the number of pairs."""
    cap = out.shape[0]
    filtered = sel.shape[0] > 0
    for i in range(s1, o1):
        ax = sp[i, 0]
        ay = sp[i, 1]
        az = sp[i, 2]
        ar = sp[i, 3]
        a = sl[i]
        fa = filtered and not sel[a]
        for j in range(i + 1, o1):  # the own objects after it: each pair once
            b = sl[j]
            if not (fa and not sel[b]) and pair_touch(ax, ay, az, ar, sp[j, 0], sp[j, 1],
                                                      sp[j, 2], sp[j, 3], margin):
                if k < cap:
                    out[k, 0] = a
                    out[k, 1] = b
                k += 1
        for j in range(s0, s1):  # the objects handed down that reach this subtree
            b = sl[j]
            if not (fa and not sel[b]) and pair_touch(ax, ay, az, ar, sp[j, 0], sp[j, 1],
                                                      sp[j, 2], sp[j, 3], margin):
                if k < cap:
                    out[k, 0] = a
                    out[k, 1] = b
                k += 1
    return k


@njit(cache=True)
def _sorted_along(s0, s1, o1, sp, sl, margin):
    """The entries [s0, o1) sorted along :data:`_DIR` by their projection's low end: packed
    (x, y, z, r, low end, high end + margin) rows, slots, and whether each is the node's own
    (>= s1). Ends are padded by the entry's scale: rounding never drops a pair."""
    m = o1 - s0
    key = np.empty(m)
    for t in range(m):
        i = s0 + t
        x = sp[i, 0]
        y = sp[i, 1]
        z = sp[i, 2]
        key[t] = _DIR[0] * x + _DIR[1] * y + _DIR[2] * z - _grow(x, y, z, sp[i, 3], 0.0)
    order = np.argsort(key)
    ss = np.empty((m, 6))
    slots = np.empty(m, dtype=np.int64)
    own = np.empty(m, dtype=np.bool_)
    for t in range(m):
        i = s0 + order[t]
        x = sp[i, 0]
        y = sp[i, 1]
        z = sp[i, 2]
        r = sp[i, 3]
        ss[t, 0] = x
        ss[t, 1] = y
        ss[t, 2] = z
        ss[t, 3] = r
        ss[t, 4] = key[order[t]]
        ss[t, 5] = _DIR[0] * x + _DIR[1] * y + _DIR[2] * z + _grow(x, y, z, r, margin)
        slots[t] = sl[i]
        own[t] = i >= s1
    return ss, slots, own


@njit(cache=True, inline="always")
def _sweep_pairs(ss, slots, own, margin, sel, out, k):
    """Sort-and-sweep of :func:`_sorted_along`'s rows: every pair with an own member whose
    projections overlap gets the exact test; at out[k:] as far as they fit, returns the end.
    Projections never spread farther apart than the centres: |d . (c_a - c_b)| <=
    |c_a - c_b|."""
    cap = out.shape[0]
    filtered = sel.shape[0] > 0
    m = ss.shape[0]
    for i in range(m):
        hi = ss[i, 5]
        oi = own[i]
        a = slots[i]
        fa = filtered and not sel[a]
        ax = ss[i, 0]
        ay = ss[i, 1]
        az = ss[i, 2]
        ar = ss[i, 3]
        for j in range(i + 1, m):
            if ss[j, 4] > hi:
                break
            if not (oi or own[j]):
                continue  # two handed-down objects: tested where one of them lives
            b = slots[j]
            if not (fa and not sel[b]) and pair_touch(ax, ay, az, ar, ss[j, 0], ss[j, 1],
                                                      ss[j, 2], ss[j, 3], margin):
                if k < cap:
                    out[k, 0] = a
                    out[k, 1] = b
                k += 1
    return k


@njit(cache=True)
def subtree_boxes(root, nd, en, box, order, stack):
    """Exact AABB of each non-empty subtree's spheres into ``box[n]`` (lo xyz, hi xyz): a
    preorder into ``order``, then children before parents. The tree's own subtree bounds
    only ever grow, so when everything moves they swell to the node cubes, sibling boxes
    touch along every face and nothing prunes; these are tight at the cost of one pass."""
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
            # padded by the scale of the sphere: rounding in the pair test never reaches past
            g = r.radius + _EPS * (abs(r.cx) + abs(r.cy) + abs(r.cz) + r.radius)
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
def _reaches(x, y, z, g, box, n):
    """Whether the cube of half-side ``g`` around (x, y, z) overlaps box ``n``."""
    return (x + g >= box[n, 0] and x - g <= box[n, 3] and y + g >= box[n, 1]
            and y - g <= box[n, 4] and z + g >= box[n, 2] and z - g <= box[n, 5])


@njit(cache=True, inline="always")
def _grow(x, y, z, r, margin):
    """Half-side of a sphere's box grown by the margin, padded against rounding."""
    g = r + margin
    return g + _EPS * (abs(x) + abs(y) + abs(z) + g) + _TINY


@njit(cache=True, inline="always")
def _child_list(ch, s0, o1, sibs, nsib, node, sph, enext, eslot, box, margin, sp, sl, w,
                stack):
    """Child ``ch``'s list written from ``w`` as far as it fits: the entries of [s0, o1)
    that reach its box, then the objects of its earlier siblings' subtrees ``sibs[:nsib]``
    that reach it (found by descents pruned with the subtree boxes). Returns the end."""
    cap = sp.shape[0]
    for j in range(s0, o1):
        x = sp[j, 0]
        y = sp[j, 1]
        z = sp[j, 2]
        if _reaches(x, y, z, _grow(x, y, z, sp[j, 3], margin), box, ch):
            if w < cap:
                sp[w, 0] = x
                sp[w, 1] = y
                sp[w, 2] = z
                sp[w, 3] = sp[j, 3]
                sl[w] = sl[j]
            w += 1
    # the margin plus rounding slack of the largest box coordinate: node boxes grown by it
    gm = margin + _EPS * (abs(box[ch, 0]) + abs(box[ch, 1]) + abs(box[ch, 2])
                          + abs(box[ch, 3]) + abs(box[ch, 4]) + abs(box[ch, 5]) + margin) + _TINY
    for i in range(nsib):
        stack[0] = sibs[i]
        top = 1
        while top > 0:
            top -= 1
            n = stack[top]
            if (box[n, 3] + gm < box[ch, 0] or box[n, 0] - gm > box[ch, 3]
                    or box[n, 4] + gm < box[ch, 1] or box[n, 1] - gm > box[ch, 4]
                    or box[n, 5] + gm < box[ch, 2] or box[n, 2] - gm > box[ch, 5]):
                continue
            e = node[n].head
            while e >= 0:
                r = sph[e]
                if _reaches(r.cx, r.cy, r.cz, _grow(r.cx, r.cy, r.cz, r.radius, margin),
                            box, ch):
                    if w < cap:
                        sp[w, 0] = r.cx
                        sp[w, 1] = r.cy
                        sp[w, 2] = r.cz
                        sp[w, 3] = r.radius
                        sl[w] = eslot[e]
                    w += 1
                e = enext[e]
            for c in range(8):
                g = node[n].child[c]
                if g >= 0 and node[g].subcount > 0:
                    stack[top] = g
                    top += 1
    return w


@njit(cache=True)
def all_pairs(root, nd, en, margin, sel, out, fnode, fs0, fs1, stack, sweep_from):
    """Every pair within ``margin`` of touching, as (slot, slot) rows in ``out`` or a grown
    copy (returned cut to the pairs); ``sel`` non-empty: only pairs with a marked member.
    ``fnode``, ``fs0``, ``fs1``, ``stack``: traversal stacks (8 per level); nodes with own x
    (own + list) above ``sweep_from`` are swept (:data:`SWEEP_FROM`)."""
    node = nd.node
    if root < 0 or node[root].subcount < 2:
        return out[:0]
    sph = en.sphere
    enext = en.next
    eslot = en.slot
    nnodes = node.shape[0]
    box = np.empty((nnodes, 6))
    subtree_boxes(root, nd, en, box, np.empty(nnodes, dtype=np.int64), stack)
    sp = np.empty((max(2 * node[root].subcount, 64), 4))
    sl = np.empty(sp.shape[0], dtype=np.int64)
    sibs = np.empty(8, dtype=np.int64)
    k = 0
    fnode[0] = root
    fs0[0] = 0
    fs1[0] = 0
    top = 1
    while top > 0:
        top -= 1
        n = fnode[top]
        s0 = fs0[top]
        s1 = fs1[top]
        rec = node[n]
        cnt = rec.count
        if s1 + cnt > sp.shape[0]:
            sp, sl = _grown_list(sp, sl, s1 + cnt)
        # own objects packed right after the list
        o1 = s1
        e = rec.head
        while e >= 0:
            r = sph[e]
            sp[o1, 0] = r.cx
            sp[o1, 1] = r.cy
            sp[o1, 2] = r.cz
            sp[o1, 3] = r.radius
            sl[o1] = eslot[e]
            o1 += 1
            e = enext[e]
        if cnt * (o1 - s0) > sweep_from:
            # a crowded node (the straddlers of a big cube lie on its three mid-planes,
            # without any order among them): a sweep along a direction no plane or axis
            # is perpendicular to, instead of every pair
            ss, ssl, own = _sorted_along(s0, s1, o1, sp, sl, margin)
            k1 = _sweep_pairs(ss, ssl, own, margin, sel, out, k)
            if k1 > out.shape[0]:
                out = grown_to(out, k1)
                k1 = _sweep_pairs(ss, ssl, own, margin, sel, out, k)
            k = k1
        elif cnt > 0:
            k1 = _node_pairs(s0, s1, o1, sp, sl, margin, sel, out, k)
            if k1 > out.shape[0]:
                out = grown_to(out, k1)
                k1 = _node_pairs(s0, s1, o1, sp, sl, margin, sel, out, k)
            k = k1
        # children: pushed so that they pop in octant order (memory order), so the lists
        # are written from the last octant down (the first to pop must own the highest
        # list: popping a frame drops everything above its list). A child's list also takes
        # the objects of its siblings done before it that reach it: a pair across two
        # sibling subtrees is tested once, in the lower octant's subtree.
        nsib = 0
        w = o1
        for c in range(7, -1, -1):
            ch = rec.child[c]
            if ch < 0 or node[ch].subcount == 0:
                continue
            w1 = _child_list(ch, s0, o1, sibs, nsib, node, sph, enext, eslot, box, margin,
                             sp, sl, w, stack)
            if w1 > sp.shape[0]:
                sp, sl = _grown_list(sp, sl, w1)
                w1 = _child_list(ch, s0, o1, sibs, nsib, node, sph, enext, eslot, box,
                                 margin, sp, sl, w, stack)
            sibs[nsib] = ch
            nsib += 1
            fnode[top] = ch
            fs0[top] = w
            fs1[top] = w1
            top += 1
            w = w1
    return out[:k]


@njit(cache=True, inline="always")
def _object_pairs(sa, ea, root, node, sph, enext, eslot, margin, sel, stack, out, k):
    """The pairs of object ``sa`` (entry ``ea``) kept from its side, by one descent with its
    box, at out[k:] as far as they fit; returns k plus their count."""
    cap = out.shape[0]
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
    return k


@njit(cache=True)
def pairs_of(slots, s2e, root, nd, en, margin, sel, out, stack):
    """Pairs with at least one member among the distinct ``slots`` (``sel``: those marked),
    in ``out`` or a grown copy; a pair of two given objects is kept from its lower slot."""
    node = nd.node
    if root < 0:
        return out[:0]
    sph = en.sphere
    enext = en.next
    eslot = en.slot
    k = 0
    for i in range(slots.shape[0]):
        sa = slots[i]
        ea = s2e[sa]
        k1 = _object_pairs(sa, ea, root, node, sph, enext, eslot, margin, sel, stack, out, k)
        if k1 > out.shape[0]:
            out = grown_to(out, k1)
            k1 = _object_pairs(sa, ea, root, node, sph, enext, eslot, margin, sel, stack,
                               out, k)
        k = k1
    return out[:k]
