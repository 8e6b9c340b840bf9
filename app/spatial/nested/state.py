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
``store.moves_hot``, ``query.query_hot``), compiled for exactly the record's type and float64
C-contiguous writable arrays: anything else raises TypeError at the call instead of
compiling a new version, and the index falls back to its checked path, which names the
problem. Each sits in its kernel's file, where a reader looks for it.
"""

from __future__ import annotations

from typing import Any

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

#: (field, type), in :func:`make_state`'s argument order
FIELDS = (
    # the preorder of the groups
    ("order", _I1), ("send", _I1), ("pos", _I1),
    # per group (index._Groups)
    ("parent", _I1), ("L", _F3), ("scale", _F1), ("W", _F3), ("ws", _F1), ("dhi", _F1),
    ("dlo", _F1), ("gmag", _F1), ("o_c", _F2), ("o_r", _F1), ("o_tight", _F1), ("o_vd", _F1),
    ("o_rmax", _F1), ("loose", _B1), ("nstale", _I1), ("gdirty", _U1), ("dirty32", _U1),
    ("b_start", _I1), ("b_count", _I1), ("wbc", _F2), ("wbr", _F1), ("wvd", _F1),
    ("sbc", _F2), ("sbr", _F1), ("svd", _F1), ("code", types.int8[::1]), ("bmark", _U1),
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


@njit(cache=True)
def make_state(order, send, pos, parent, L, scale, W, ws, dhi, dlo, gmag, o_c, o_r, o_tight, o_vd,
               o_rmax, loose, nstale, gdirty, dirty32, b_start, b_count, wbc, wbr, wvd, sbc, sbr,
               svd, code, bmark, blist, scanned, ids, lc, rad, vd, stale, x, y, z, r32, vd32,
               log_rows, log_grp, nlog, nbl, codes, act, cuts, sure, near):
    """A :class:`NestedState` over the given arrays (in FIELDS' order)."""
    st = structref.new(STATE_TYPE)
    st.order = order
    st.send = send
    st.pos = pos
    st.parent = parent
    st.L = L
    st.scale = scale
    st.W = W
    st.ws = ws
    st.dhi = dhi
    st.dlo = dlo
    st.gmag = gmag
    st.o_c = o_c
    st.o_r = o_r
    st.o_tight = o_tight
    st.o_vd = o_vd
    st.o_rmax = o_rmax
    st.loose = loose
    st.nstale = nstale
    st.gdirty = gdirty
    st.dirty32 = dirty32
    st.b_start = b_start
    st.b_count = b_count
    st.wbc = wbc
    st.wbr = wbr
    st.wvd = wvd
    st.sbc = sbc
    st.sbr = sbr
    st.svd = svd
    st.code = code
    st.bmark = bmark
    st.blist = blist
    st.scanned = scanned
    st.ids = ids
    st.lc = lc
    st.rad = rad
    st.vd = vd
    st.stale = stale
    st.x = x
    st.y = y
    st.z = z
    st.r32 = r32
    st.vd32 = vd32
    st.log_rows = log_rows
    st.log_grp = log_grp
    st.nlog = nlog
    st.nbl = nbl
    st.codes = codes
    st.act = act
    st.cuts = cuts
    st.sure = sure
    st.near = near
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
    out[8] = st.dhi.ctypes.data
    out[9] = st.dlo.ctypes.data
    out[10] = st.gmag.ctypes.data
    out[11] = st.o_c.ctypes.data
    out[12] = st.o_r.ctypes.data
    out[13] = st.o_tight.ctypes.data
    out[14] = st.o_vd.ctypes.data
    out[15] = st.o_rmax.ctypes.data
    out[16] = st.loose.ctypes.data
    out[17] = st.nstale.ctypes.data
    out[18] = st.gdirty.ctypes.data
    out[19] = st.dirty32.ctypes.data
    out[20] = st.b_start.ctypes.data
    out[21] = st.b_count.ctypes.data
    out[22] = st.wbc.ctypes.data
    out[23] = st.wbr.ctypes.data
    out[24] = st.wvd.ctypes.data
    out[25] = st.sbc.ctypes.data
    out[26] = st.sbr.ctypes.data
    out[27] = st.svd.ctypes.data
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


def state_arrays(G: Any, R: Any, order: np.ndarray, send: np.ndarray, pos: np.ndarray,
                 log_rows: np.ndarray, log_grp: np.ndarray, nlog: np.ndarray, nbl: np.ndarray,
                 codes: np.ndarray, act: np.ndarray, cuts: np.ndarray, sure: np.ndarray,
                 near: np.ndarray) -> tuple:
    """The arrays of an index's groups ``G``, rows ``R`` and scratch in FIELDS' order."""
    here = {"order": order, "send": send, "pos": pos, "log_rows": log_rows,
            "log_grp": log_grp, "nlog": nlog, "nbl": nbl, "codes": codes, "act": act,
            "cuts": cuts, "sure": sure, "near": near}
    out = []
    for n in NAMES:
        a = here.get(n)
        if a is None:
            a = getattr(R, n) if n in R._fields else getattr(G, n)
        out.append(a)
    return tuple(out)
