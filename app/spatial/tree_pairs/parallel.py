"""The pair descent on every thread, and :func:`snapshot_pairs`, the entry both trees call:
a snapshot of at least :data:`PARALLEL_PAIRS_MIN` objects has self(root) expanded breadth
first into seed tasks, dealt to the threads by their estimated work, each thread descending
its share with its own stack, pending buffer and output; below it the serial descent runs.
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np
from numba import njit, prange

from app.parallelism import PARALLEL_MIN, threads_for
from app.spatial.pairs import new_pairs, slot_pairs_into, slot_pairs_to_ids
from app.spatial.tree_pairs.descent import (
    PENDING,
    STACK_SLACK,
    DescentScratch,
    descend,
    descend_steps,
    flush_pending,
    longest_own,
)
from app.spatial.tree_pairs.refine import block_span
from app.spatial.tree_pairs.snapshot import SnapshotArena, TreePairSnapshot


class ThreadScratch(NamedTuple):
    """Every thread's :class:`.descent.DescentScratch` arrays (a leading thread axis), its
    output and where it stopped (top, pairs in out, pending pairs)."""

    rows_a: np.ndarray  # (threads, longest own list)
    rows_b: np.ndarray  # (threads, longest own list)
    pend: np.ndarray  # (threads, PENDING, 2)
    stack: np.ndarray  # (threads, rows, 2)
    out: np.ndarray  # (threads, rows, 2) each thread's slot pairs
    state: np.ndarray  # (threads, 3) top, pairs in out, pending pairs



# ---------------------------------------------------------------------- both cores

#: Snapshots of at least this many objects run the descent on every thread (tests lower it).
PARALLEL_PAIRS_MIN = PARALLEL_MIN
#: Seed tasks per thread that the breadth-first expansion of the root aims at. Measured when
#: the tasks were dealt by object count (before :func:`_seed_weights` weighed pairs by their
#: overlap): with 48 a thread, one thread of two got 10.2 ms of a clustered 10^5 descent and
#: the other 5.6; with 128 about even (8.1 / 7.5 at 256), the parallel descent 11.7 -> 8.4
#: ms; on 28 Nov 256, 512 and 1,024 moved the balance by chance (not measured again since).
SEEDS_PER_THREAD = 128


def snapshot_pairs(sn: TreePairSnapshot, margin: float, sel: np.ndarray,
                   arena: SnapshotArena | None, ids: np.ndarray) -> np.ndarray:
    """Every touching pair of the snapshot's objects as id pairs, the smaller first (``ids``:
    the store's id per slot; the contract's answer), int64 (K, 2).

    ``sel``: the ids filter of :func:`app.spatial.pairs.selection` (empty: every pair). A
    snapshot of at least PARALLEL_PAIRS_MIN objects runs :func:`descend_parallel` on every
    thread (its per-thread outputs kept in ``arena`` when given), a smaller one the serial
    :func:`.descent.descend`.
    """
    n = sn.pts.shape[0]
    if n < PARALLEL_PAIRS_MIN:
        return slot_pairs_to_ids(descend(sn, margin, sel), ids)
    with threads_for(n):
        nt = max(2, numba.get_num_threads())
        return descend_parallel(sn, margin, sel, nt, SEEDS_PER_THREAD * nt, n // nt + 1024,
                                3 * STACK_SLACK, ids, arena)


def descend_parallel(sn: TreePairSnapshot, margin: float, sel: np.ndarray, nt: int, want: int,
                     out_rows: int, stack_rows: int, ids: np.ndarray,
                     arena: SnapshotArena | None = None) -> np.ndarray:
    """:func:`_descend_parallel` on ``nt`` threads, each with an output of at least
    ``out_rows`` rows to start with (the arena's, grown and kept, when given), their slot
    pairs joined into one array of id pairs (:func:`_join_ids`). The outputs and the answer
    are numpy's arrays: allocated inside a kernel, the 50-80 MB of two million pairs cost a
    page fault every 4 KiB."""
    out = (arena.outputs(nt, out_rows) if arena is not None
           else np.empty((nt, max(1, out_rows), 2), np.int64))
    first, out, state = _descend_parallel(sn, margin, sel, out, want, stack_rows)
    if arena is not None:
        arena.keep_outputs(out)
    res = np.empty((first.shape[0] + int(state[:, 1].sum()), 2), np.int64)
    _join_ids(first, out, state, ids, res)
    return res


#: Blocks each of :func:`_join_ids`'s sources is cut into (dealt to the threads by prange).
JOIN_BLOCKS = 4


@njit(cache=True, parallel=True)
def _join_ids(first, out, state, ids, res) -> None:
    """``first``, then each thread's ``state[w, 1]`` pairs of ``out[w]``, into ``res``, each
    slot pair written as its ids, the smaller first (:func:`app.spatial.pairs.slot_pairs_to_ids`'s
    loop), in blocks on every thread: the answer in one pass. A join of slot pairs and then a
    separate mapping pass wrote two fresh arrays (a page fault every 4 KiB each): 0.5 + 0.7
    ms of a 10^5-object step (two hundred thousand pairs) against 0.7-0.8 ms (0.45 on its own,
    out of the step)."""
    nt = out.shape[0]
    at = np.empty(nt + 1, np.int64)  # where each source's pairs start in res
    at[0] = 0
    at[1] = first.shape[0]
    for w in range(nt - 1):
        at[w + 2] = at[w + 1] + state[w, 1]
    for t in prange((nt + 1) * JOIN_BLOCKS):
        src = t // JOIN_BLOCKS
        b = t % JOIN_BLOCKS
        if src == 0:
            k0, k1 = block_span(first.shape[0], JOIN_BLOCKS, b)
            slot_pairs_into(first[k0:k1], ids, res[k0:k1])
        else:
            k0, k1 = block_span(state[src - 1, 1], JOIN_BLOCKS, b)
            r0 = at[src] + k0
            slot_pairs_into(out[src - 1, k0:k1], ids, res[r0:r0 + k1 - k0])


@njit(cache=True)
def _seed_tasks(sn: TreePairSnapshot, margin: float, sel, want: int):
    """Expand self(root) breadth first, one task at a time, until at least ``want`` tasks
    are open (or none is): (open tasks (T, 2), pairs found on the way (K, 2)). Each task is
    run alone on a stack with room for one task's children only, so it stops right after it
    (or, with a single child pushed, after that child too)."""
    out = new_pairs(1024)
    k = np.int64(0)
    filtered = sel.shape[0] > 0
    longest = longest_own(sn)
    scratch = DescentScratch(np.empty(longest, np.int64), np.empty(longest, np.int64),
                             np.empty((PENDING, 2), np.int64),
                             np.empty((STACK_SLACK + 1, 2), np.int64))
    one = scratch.stack
    cur = np.empty((1, 2), np.int64)
    cur[0, 0] = 0
    cur[0, 1] = -1
    ncur = 1
    while 0 < ncur < want:
        nxt = np.empty((16, 2), np.int64)
        nn = 0
        for t in range(ncur):
            one[0, 0] = cur[t, 0]
            one[0, 1] = cur[t, 1]
            top, npend = descend_steps(sn, margin, filtered, scratch, np.int64(1))
            out, k = flush_pending(scratch.pend, npend, sn.slot, sel, out, k)
            if nn + top > nxt.shape[0]:
                bigger = np.empty((2 * (nn + top), 2), np.int64)
                bigger[:nn] = nxt[:nn]
                nxt = bigger
            nxt[nn:nn + top] = one[:top]
            nn += top
        cur = nxt
        ncur = nn
    return cur[:ncur], out[:k]


@njit(cache=True, _nrt=False)
def _flush_into(pend, npend: int, slot, sel, out, k: int) -> int:
    """:func:`.descent.flush_pending` into ``out`` with room for every pending pair; returns
    the new k."""
    filtered = sel.shape[0] > 0
    for t in range(npend):
        a = slot[pend[t, 0]]
        b = slot[pend[t, 1]]
        if not filtered or sel[a] or sel[b]:
            out[k, 0] = a
            out[k, 1] = b
            k += 1
    return k


@njit(cache=True, _nrt=False)
def _worker(sn: TreePairSnapshot, margin: float, sel, scratch: DescentScratch, out,
            state) -> None:
    """One thread's descent of the tasks on its ``scratch.stack``, resumed from ``state``
    (top, pairs in ``out``, pending pairs); stops when done or when its stack or output
    needs room (the driver grows them and calls again)."""
    filtered = sel.shape[0] > 0
    slot = sn.slot
    pend = scratch.pend
    stack = scratch.stack
    top = state[0]
    k = state[1]
    npend = state[2]
    while True:
        if npend > 0:
            if k + npend > out.shape[0]:
                break
            k = _flush_into(pend, npend, slot, sel, out, k)
            npend = np.int64(0)
        if top == 0 or top + STACK_SLACK > stack.shape[0]:
            break
        top, npend = descend_steps(sn, margin, filtered, scratch, top)
    state[0] = top
    state[1] = k
    state[2] = npend


@njit(cache=True, parallel=True)
def _run_workers(sn: TreePairSnapshot, margin: float, sel, work: ThreadScratch) -> None:
    """:func:`_worker` of every thread, each on its own buffers."""
    for w in prange(work.state.shape[0]):
        _worker(sn, margin, sel, DescentScratch(work.rows_a[w], work.rows_b[w], work.pend[w],
                                                work.stack[w]), work.out[w], work.state[w])


@njit(cache=True, _nrt=False)
def _share_within(b, i: int, c, j: int) -> float:
    """The share of box row i of b's volume inside box row j of c (1 for a box without
    volume: it counts whole)."""
    vol = 1.0
    ov = 1.0
    for a in range(3):
        vol *= b[i, 3 + a] - b[i, a]
        ov *= max(0.0, min(b[i, 3 + a], c[j, 3 + a]) - max(b[i, a], c[j, a]))
    return 1.0 if not vol > 0.0 else min(1.0, ov / vol)


@njit(cache=True)
def _seed_weights(sn: TreePairSnapshot, seeds):
    """Each seed task's estimated work, the size the tasks are dealt out by: a self task's
    subtree objects; a pair's objects inside the overlap of its two items' boxes (each
    side's count times the share of its box the other's covers), plus one.

    A pair task's work lies where its items meet: dealt by the two items' whole counts, a
    clustered snapshot's threads got 55-65 % and 35-45 % of the work (10^5 and 10^6, three
    steps each, each seed's tests counted alone); by the overlap, 50-52 % (uniform 50-52 %
    either way)."""
    ostart, ocnt, oend, box, obox = sn.ostart, sn.ocnt, sn.oend, sn.box, sn.obox
    ns = seeds.shape[0]
    weight = np.empty(ns)
    for t in range(ns):
        a = seeds[t, 0]
        b = seeds[t, 1]
        if b < 0:
            weight[t] = oend[a] - ostart[a]
            continue
        i = a >> 1
        j = b >> 1
        a_own = (a & 1) == 1
        b_own = (b & 1) == 1
        na = ocnt[i] if a_own else oend[i] - ostart[i]
        nb = ocnt[j] if b_own else oend[j] - ostart[j]
        bi = obox if a_own else box
        bj = obox if b_own else box
        weight[t] = 1.0 + na * _share_within(bi, i, bj, j) + nb * _share_within(bj, j, bi, i)
    return weight


@njit(cache=True)
def _descend_parallel(sn: TreePairSnapshot, margin: float, sel, out, want: int,
                      stack_rows: int):
    """:func:`.descent.descend` on one thread per row of ``out``: self(root) expanded breadth first
    into ``want`` or more independent seed tasks (:func:`_seed_tasks`), dealt out in a snake
    over their sizes (largest first) to the threads, which descend them independently, each
    with its own stack, pending buffer and output (grown between rounds when one runs short).
    The tasks partition the serial descent's: the same pairs. Returns (the pairs found while
    seeding, the outputs (grown or ``out``), state: row w's pairs are out[w, :state[w, 1]]).

    ``out`` (threads, rows, 2) / ``stack_rows``: each thread's first output / free stack room
    (tests make them small to exercise the growing)."""
    nt = out.shape[0]
    state = np.zeros((nt, 3), np.int64)
    if sn.size.shape[0] == 0:
        return new_pairs(0)[:0], out, state
    seeds, first = _seed_tasks(sn, margin, sel, want)
    ns = seeds.shape[0]
    order = np.argsort(-_seed_weights(sn, seeds), kind="mergesort")
    longest = longest_own(sn)
    stack = np.empty((nt, STACK_SLACK + max(1, stack_rows) + ns // nt + 1, 2), np.int64)
    for u in range(ns):  # snake: 0, 1, ..., nt-1, nt-1, ..., 0, 0, 1, ...
        r = u % (2 * nt)
        w = r if r < nt else 2 * nt - 1 - r
        t = order[u]
        stack[w, state[w, 0], 0] = seeds[t, 0]
        stack[w, state[w, 0], 1] = seeds[t, 1]
        state[w, 0] += 1
    # the tasks are pushed largest first: the stack runs them last, small ones fill it first
    work = ThreadScratch(np.empty((nt, longest), np.int64), np.empty((nt, longest), np.int64),
                         np.empty((nt, PENDING, 2), np.int64), stack, out, state)
    while True:
        _run_workers(sn, margin, sel, work)
        stack = work.stack
        out = work.out
        need_stack = False
        need_out = False
        want_rows = 2 * out.shape[1]
        for w in range(nt):
            if state[w, 2] > 0 and state[w, 1] + state[w, 2] > out.shape[1]:
                need_out = True
                want_rows = max(want_rows, state[w, 1] + state[w, 2])
            elif state[w, 0] > 0:
                need_stack = True
        if not need_stack and not need_out:
            break
        if need_stack:
            bigger = np.empty((nt, 2 * stack.shape[1], 2), np.int64)
            for w in range(nt):
                bigger[w, :state[w, 0]] = stack[w, :state[w, 0]]
            stack = bigger
        if need_out:
            grown = np.empty((nt, want_rows, 2), np.int64)
            for w in range(nt):
                grown[w, :state[w, 1]] = out[w, :state[w, 1]]
            out = grown
        work = ThreadScratch(work.rows_a, work.rows_b, work.pend, stack, out, state)
    return first, work.out, state
