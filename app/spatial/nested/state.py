"""The nested index's arrays as one compiled record, so that a frame's three calls
(set_transforms, update, query_frustum) cross from Python into compiled code with a handful
of arguments instead of fifty.

Why: numba unboxes every array argument of a call from Python (about 50 ns each), and a call
between two compiled functions passes each array's fields (about 13 ns an array). The
per-frame kernels read some fifty arrays, so the crossings cost 3-5 us a call, a fifth of a
100 x 1,000 frame (issue 15). A StructRef is unboxed as one pointer. It holds references to
the index's arrays, not copies: the index rebuilds it (:func:`make_state`) whenever it
replaces one of them (growth, a new arena, a new preorder, larger scratch), and ``validate``
checks that it still points at the current ones (:func:`state_pointers`).

Each per-frame kernel has a typed entry point next to it (``groups.transforms_hot``,
``update.moves_hot``, ``query.query_hot``), compiled for exactly the record's type and float64
C-contiguous writable arrays: anything else raises TypeError at the call instead of
compiling a new version, and the index falls back to its checked path, which names the
problem. Each sits in its kernel's file, where a reader looks for it.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
from numba import njit, types
from numba.experimental import structref


@structref.register
class NestedStateType(types.StructRef):
    """The numba type of :class:`NestedState`."""

    def preprocess_fields(self, fields: Any) -> tuple:
        return tuple((name, types.unliteral(t)) for name, t in fields)


class NestedState(structref.StructRefProxy):
    """The compiled record of a nested index's arrays (opaque to Python)."""


structref.define_boxing(NestedStateType, NestedState)

_I1 = types.int64[::1]
_F1 = types.float64[::1]
_F2 = types.float64[:, ::1]
_F3 = types.float64[:, :, ::1]
_U1 = types.uint8[::1]
_B1 = types.boolean[::1]
_S1 = types.float32[::1]

#: (field, type) of the record
FIELDS = (
    # the preorder of the groups
    ("order", _I1), ("send", _I1), ("pos", _I1),
    # per group (tree.GroupTable)
    ("parent", _I1), ("L", _F3), ("scale", _F1), ("W", _F3), ("ws", _F1), ("stretch_hi", _F1),
    ("stretch_lo", _F1), ("world_mag", _F1), ("own_c", _F2), ("own_r", _F1), ("own_tight", _F1),
    ("own_vd", _F1),
    ("own_rmax", _F1), ("loose", _B1), ("nstale", _I1), ("gdirty", _U1), ("dirty32", _U1),
    ("b_start", _I1), ("b_count", _I1), ("world_c", _F2), ("world_r", _F1), ("world_vd", _F1),
    ("sub_c", _F2), ("sub_r", _F1), ("sub_vd", _F1), ("code", types.int8[::1]), ("bmark", _U1),
    ("blist", _I1), ("scanned", _U1),
    # per row (store.NestedRows)
    ("ids", _I1), ("lc", _F2), ("rad", _F1), ("vd", _F1), ("stale", _U1), ("x", _S1),
    ("y", _S1), ("z", _S1), ("r32", _S1), ("vd32", _S1),
    # the move log, the bounds-dirty count, the descent's scratch
    ("log_rows", _I1), ("log_grp", _I1), ("nlog", _I1), ("nbl", _I1), ("codes", _U1),
    ("act", _U1), ("cuts", types.uint64[::1]), ("sure", _I1), ("near", _I1),
)
NAMES = tuple(name for name, _ in FIELDS)
#: the record's numba type
STATE_TYPE = NestedStateType(list(FIELDS))


class GroupArrays(NamedTuple):
    """The per-group arrays the record holds (``tree.GroupTable``'s of the same names)."""

    parent: np.ndarray
    L: np.ndarray
    scale: np.ndarray
    W: np.ndarray
    ws: np.ndarray
    stretch_hi: np.ndarray
    stretch_lo: np.ndarray
    world_mag: np.ndarray
    own_c: np.ndarray
    own_r: np.ndarray
    own_tight: np.ndarray
    own_vd: np.ndarray
    own_rmax: np.ndarray
    loose: np.ndarray
    nstale: np.ndarray
    gdirty: np.ndarray
    dirty32: np.ndarray
    b_start: np.ndarray
    b_count: np.ndarray
    world_c: np.ndarray
    world_r: np.ndarray
    world_vd: np.ndarray
    sub_c: np.ndarray
    sub_r: np.ndarray
    sub_vd: np.ndarray
    code: np.ndarray
    bmark: np.ndarray
    blist: np.ndarray
    scanned: np.ndarray


class FrameArrays(NamedTuple):
    """The preorder of the groups, the move log, the bounds-dirty count and the descent's
    scratch, as the record holds them."""

    order: np.ndarray
    send: np.ndarray
    pos: np.ndarray
    log_rows: np.ndarray
    log_grp: np.ndarray
    nlog: np.ndarray
    nbl: np.ndarray
    codes: np.ndarray
    act: np.ndarray
    cuts: np.ndarray
    sure: np.ndarray
    near: np.ndarray


@njit(cache=True)
def make_state(groups: GroupArrays, rows: Any, frame: FrameArrays) -> Any:
    """A :class:`NestedState` over the arrays of the index's groups, its arena (a
    ``store.NestedRows``) and its preorder, move log and scratch (FIELDS lists them)."""
    st = structref.new(STATE_TYPE)
    st.order = frame.order
    st.send = frame.send
    st.pos = frame.pos
    st.parent = groups.parent
    st.L = groups.L
    st.scale = groups.scale
    st.W = groups.W
    st.ws = groups.ws
    st.stretch_hi = groups.stretch_hi
    st.stretch_lo = groups.stretch_lo
    st.world_mag = groups.world_mag
    st.own_c = groups.own_c
    st.own_r = groups.own_r
    st.own_tight = groups.own_tight
    st.own_vd = groups.own_vd
    st.own_rmax = groups.own_rmax
    st.loose = groups.loose
    st.nstale = groups.nstale
    st.gdirty = groups.gdirty
    st.dirty32 = groups.dirty32
    st.b_start = groups.b_start
    st.b_count = groups.b_count
    st.world_c = groups.world_c
    st.world_r = groups.world_r
    st.world_vd = groups.world_vd
    st.sub_c = groups.sub_c
    st.sub_r = groups.sub_r
    st.sub_vd = groups.sub_vd
    st.code = groups.code
    st.bmark = groups.bmark
    st.blist = groups.blist
    st.scanned = groups.scanned
    st.ids = rows.ids
    st.lc = rows.lc
    st.rad = rows.rad
    st.vd = rows.vd
    st.stale = rows.stale
    st.x = rows.x
    st.y = rows.y
    st.z = rows.z
    st.r32 = rows.r32
    st.vd32 = rows.vd32
    st.log_rows = frame.log_rows
    st.log_grp = frame.log_grp
    st.nlog = frame.nlog
    st.nbl = frame.nbl
    st.codes = frame.codes
    st.act = frame.act
    st.cuts = frame.cuts
    st.sure = frame.sure
    st.near = frame.near
    return st


@njit(cache=True)
def state_pointers(st):
    """The data address of every array the record points at (FIELDS' order): what
    ``validate`` compares with the index's current arrays."""
    out = np.empty(51, np.int64)
    out[0] = st.order.ctypes.data
    out[1] = st.send.ctypes.data
    out[2] = st.pos.ctypes.data
    out[3] = st.parent.ctypes.data
    out[4] = st.L.ctypes.data
    out[5] = st.scale.ctypes.data
    out[6] = st.W.ctypes.data
    out[7] = st.ws.ctypes.data
    out[8] = st.stretch_hi.ctypes.data
    out[9] = st.stretch_lo.ctypes.data
    out[10] = st.world_mag.ctypes.data
    out[11] = st.own_c.ctypes.data
    out[12] = st.own_r.ctypes.data
    out[13] = st.own_tight.ctypes.data
    out[14] = st.own_vd.ctypes.data
    out[15] = st.own_rmax.ctypes.data
    out[16] = st.loose.ctypes.data
    out[17] = st.nstale.ctypes.data
    out[18] = st.gdirty.ctypes.data
    out[19] = st.dirty32.ctypes.data
    out[20] = st.b_start.ctypes.data
    out[21] = st.b_count.ctypes.data
    out[22] = st.world_c.ctypes.data
    out[23] = st.world_r.ctypes.data
    out[24] = st.world_vd.ctypes.data
    out[25] = st.sub_c.ctypes.data
    out[26] = st.sub_r.ctypes.data
    out[27] = st.sub_vd.ctypes.data
    out[28] = st.code.ctypes.data
    out[29] = st.bmark.ctypes.data
    out[30] = st.blist.ctypes.data
    out[31] = st.scanned.ctypes.data
    out[32] = st.ids.ctypes.data
    out[33] = st.lc.ctypes.data
    out[34] = st.rad.ctypes.data
    out[35] = st.vd.ctypes.data
    out[36] = st.stale.ctypes.data
    out[37] = st.x.ctypes.data
    out[38] = st.y.ctypes.data
    out[39] = st.z.ctypes.data
    out[40] = st.r32.ctypes.data
    out[41] = st.vd32.ctypes.data
    out[42] = st.log_rows.ctypes.data
    out[43] = st.log_grp.ctypes.data
    out[44] = st.nlog.ctypes.data
    out[45] = st.nbl.ctypes.data
    out[46] = st.codes.ctypes.data
    out[47] = st.act.ctypes.data
    out[48] = st.cuts.ctypes.data
    out[49] = st.sure.ctypes.data
    out[50] = st.near.ctypes.data
    return out


def state_records(tree: Any, arena: Any) -> tuple[GroupArrays, Any, FrameArrays]:
    """:func:`make_state`'s arguments from an index's group tree (``tree.GroupTree``: its
    group table, preorder, bounds-dirty count, per-group scratch) and object arena
    (``arena.ObjectArena``: its rows, move log, per-row scratch)."""
    G = tree.G
    groups = GroupArrays(*(getattr(G, n) for n in GroupArrays._fields))
    frame = FrameArrays(tree.order, tree.send, tree.pos, arena.log_rows, arena.log_grp,
                        arena.nlog, tree.nbl, arena.codes, tree.act, tree.cuts, arena.sure,
                        arena.near)
    return groups, arena.R, frame


def state_arrays(groups: GroupArrays, rows: Any, frame: FrameArrays) -> tuple:
    """The arrays of :func:`state_records`' records in FIELDS' order (what
    :func:`state_pointers` is compared with)."""
    out = []
    for n in NAMES:
        for rec in (frame, groups, rows):
            if n in rec._fields:
                out.append(getattr(rec, n))
                break
    return tuple(out)


class StateRecord:
    """Where a nested index keeps its compiled record: made at the first per-frame call that
    needs it (:meth:`get`; the hot paths read ``st or get()``), dropped (:meth:`drop`) by
    whatever replaces an array it points at (the tree's growth and new preorder, the arena's
    new rows). The tree and the arena share one; a copy of the index starts without it."""

    def __init__(self) -> None:
        self.st: Any = None
        self.tree: Any = None  # set by the index once both parts exist
        self.arena: Any = None

    def get(self) -> Any:
        """The record, made now if it was dropped."""
        if self.st is None:
            self.st = make_state(*state_records(self.tree, self.arena))
        return self.st

    def drop(self) -> None:
        """An array the record points at was replaced: make it again when next needed."""
        self.st = None

    def points_at_current(self) -> bool:
        """The record (if made) points at the arrays the tree and the arena use now."""
        return self.st is None or state_pointers(self.st).tolist() == [
            a.ctypes.data for a in state_arrays(*state_records(self.tree, self.arena))]

    def __getstate__(self) -> dict[str, Any]:
        """Everything but the compiled record (``copy.deepcopy`` of an index)."""
        return {**self.__dict__, "st": None}
