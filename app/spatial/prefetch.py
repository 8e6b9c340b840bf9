"""A software prefetch for compiled loops over scattered rows: ``prefetch(a, i)``.

A batch of moves reads and writes rows all over arrays of millions (a slot's store row, a
position's float32 lanes, its chunk's limits). Out-of-order execution overlaps those cache
misses only as far as its window reaches, which a long loop body (a dozen reads and writes a
move) cuts to one or two moves. Asking for a later move's rows some iterations ahead keeps
several moves' misses in flight at once. The hint changes no value and never faults; a
kernel stays exact whatever it prefetches.

Each loop writes its scattered rows' hints out (``if i + PREFETCH_AHEAD < n: prefetch(rows,
idx[i + PREFETCH_AHEAD])``) rather than calling a shared helper: a numba helper given arrays,
inlined or not, pays their reference counts or their argument copies at every call, which
costs about what the hint saves. The batch's own rows, asked for every eighth row, take
:func:`rows_ahead`: there a call's cost is spread over eight rows (moving at 10^5, with the
helper or written out: the same within noise).
"""

from __future__ import annotations

from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

#: How many moves ahead a batch loop asks for a move's lines: enough to cover a miss at a
#: few tens of nanoseconds a move, few enough that the lines are still there when used.
PREFETCH_AHEAD = 16
#: How far ahead an update's id resolve asks for an id's home bit (its direct entry half as
#: far): a resolve takes a few nanoseconds an id, so 16 ids ahead start each miss too late.
#: From a cold cache (64 MB streamed between calls, /tmp/s/resolve10m.py), 10^4 fresh ids:
#: of 10^7 at home 131-135 -> 107-116 us, of 10^7 by the table 181 -> 137, of 10^6 by the
#: table 162 -> 126; warm the same. The removal's and insert's short loops showed no change.
PREFETCH_FAR = 2 * PREFETCH_AHEAD
#: How many rows ahead a loop that reads arrays *in order* asks for them (1 KiB of 16-byte
#: records), a line at a time. The hardware's stream prefetch does not cover such loops on
#: this machine once their body is long or they read and write several streams: the
#: out-of-order window holds a few rows' work, so rows beyond the cache come a miss at a time
#: (a box over 10^6 records: 10 ns a record against 3.5 within the cache, 3.1 with the
#: hints; a batch of every object at 10^5 written in order: 5.6-5.8 -> 4.4-4.5 ns a row). A
#: loop over one array with a short body (a sum, the frustum scan) keeps enough loads in
#: flight by itself.
STREAM_AHEAD = 64

_I8P = ir.IntType(8).as_pointer()
_I32 = ir.IntType(32)


@njit(cache=True, inline="always")
def spread_out(rows) -> bool:
    """Whether a batch's rows spread over more than four times its length (judged by its
    ends): worth prefetching. A batch as dense as its table (every object moving, in order)
    is read in order, which the hardware streams already, and the hints only cost it time
    (0.1-0.3 ms a frame at 10^5 for the grid's update)."""
    n = rows.shape[0]
    return n > 0 and abs(rows[n - 1] - rows[0]) > 4 * n


def _prefetch_codegen(context, builder, aty, ary, offsets):
    """Emit ``llvm.prefetch`` (rw 1: for writing, locality 3: every level, data) of the
    address of ``ary``'s element at the given (index value, axis) pairs."""
    addr = builder.ptrtoint(ary.data, cgutils.intp_t)
    for value, axis in offsets:
        stride = builder.extract_value(ary.strides, axis)
        addr = builder.add(addr, builder.mul(value, stride))
    fnty = ir.FunctionType(ir.VoidType(), [_I8P, _I32, _I32, _I32])
    fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0i8")
    builder.call(fn, [builder.inttoptr(addr, _I8P), ir.Constant(_I32, 1), ir.Constant(_I32, 3),
                      ir.Constant(_I32, 1)])
    return context.get_dummy_value()


@intrinsic
def prefetch(typingctx, arr, index):
    """Hint the cache to fetch row ``index`` of ``arr`` (the line where it starts), for
    writing, into every cache level. Rows are along the first axis, at the array's own
    stride; an index outside the array is harmless (a prefetch never faults), but callers
    keep to valid ones."""
    if not isinstance(arr, types.Array) or not isinstance(index, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        aty, ity = signature.args
        ary = context.make_array(aty)(context, builder, args[0])
        i = context.cast(builder, args[1], ity, types.intp)
        return _prefetch_codegen(context, builder, aty, ary, [(i, 0)])

    return types.void(arr, index), codegen


@intrinsic
def prefetch_at(typingctx, arr, row, col):
    """:func:`prefetch` of element (row, col) of a 2-D array: a later line of a wide row."""
    if (not isinstance(arr, types.Array) or arr.ndim != 2
            or not isinstance(row, types.Integer) or not isinstance(col, types.Integer)):
        return None

    def codegen(context, builder, signature, args):
        aty, rty, cty = signature.args
        ary = context.make_array(aty)(context, builder, args[0])
        i = context.cast(builder, args[1], rty, types.intp)
        j = context.cast(builder, args[2], cty, types.intp)
        return _prefetch_codegen(context, builder, aty, ary, [(i, 0), (j, 1)])

    return types.void(arr, row, col), codegen


@njit(cache=True, inline="always")
def rows_ahead(ids, centers, i: int, n: int) -> int:
    """Ask for a batch's rows :data:`STREAM_AHEAD` ahead of row ``i`` of ``n``: its ids (or
    positions) and its centres (eight 24-byte rows: three lines), a line at a time, so call
    it every eighth row. Returns the row asked for, for the batch's other columns."""
    a = min(i + STREAM_AHEAD, n - 1)
    prefetch(ids, a)
    prefetch(centers, a)
    prefetch(centers, min(a + 3, n - 1))
    prefetch(centers, min(a + 6, n - 1))
    return a


@njit(cache=True, inline="always")
def batch_rows_ahead(ids, centers, radii, vdist, i: int, n: int) -> None:
    """:func:`rows_ahead`, and the same row of the batch's radii and view distances where it
    carries them (None: it does not; numba compiles each combination apart)."""
    a = rows_ahead(ids, centers, i, n)
    if radii is not None:
        prefetch(radii, a)
    if vdist is not None:
        prefetch(vdist, a)
