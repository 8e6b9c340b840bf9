"""The timing model without a window: frames open and close, their stages add up, stalls and
compiles are named; the frame graph's geometry (app/render/frame_graph.py) as plain arrays."""

from __future__ import annotations

import numpy as np

from app.framelog import TIME_STAGES
from app.render.frame_graph import (
    BUDGETS_MS,
    STALL_RGBA,
    GraphRect,
    graph_layout,
    graph_quads,
    graph_scale,
    legend_columns,
)
from app.viewer.state import FrameStats
from app.viewer.timing import STAGE_COLUMNS, CompileClock, FrameClock, FrameHistory


def _frame(started: float, **ms: float) -> FrameStats:
    st = FrameStats(**ms)
    st.started = started
    return st


def test_a_frame_closes_at_the_next_start_and_its_stages_sum_to_its_wall_time():
    clock = FrameClock()
    st = _frame(0.0, cull_ms=2.0, draw_ms=5.0)
    clock.begin(st, 100.0, 0.0)
    clock.add_present(1.5)
    clock.note_stall("rebuild kd", 300.0)
    assert clock.close(100.320) is st and clock.open is None and clock.last is st
    assert abs(st.frame_ms - 320.0) < 1e-6
    assert st.present_ms == 1.5 and st.stall_ms == 300.0 and st.stall == "rebuild kd 300 ms"
    assert abs(st.other_ms - (320.0 - 308.5)) < 1e-6
    assert abs(sum(getattr(st, c) for c in STAGE_COLUMNS) - st.frame_ms) < 1e-9
    assert clock.close() is None  # nothing open


def test_the_brute_force_reference_is_left_out_of_the_frame_and_its_stages():
    """A frame that measured the brute-force reference (app/viewer/brute_reference.py) spent
    ``reference_ms`` outside its stages: its wall time leaves it out, so fps does too."""
    clock = FrameClock()
    st = _frame(0.0, cull_ms=2.0, draw_ms=5.0, reference_ms=4.0)
    clock.begin(st, 100.0, 0.0)
    clock.close(100.020)
    assert abs(st.frame_ms - 16.0) < 1e-6 and abs(st.fps - 62.5) < 1e-6
    assert abs(st.other_ms - 9.0) < 1e-6
    assert abs(sum(getattr(st, c) for c in STAGE_COLUMNS) - st.frame_ms) < 1e-9


def test_a_stall_before_the_first_frame_goes_to_it():
    clock = FrameClock()
    clock.note_stall("rebuild octree", 12.0)
    st = _frame(0.0)
    clock.begin(st, 5.0, 0.0)
    assert st.stall_ms == 12.0 and st.stall.startswith("rebuild octree")


def test_compiles_during_a_frame_name_it_without_adding_a_stage():
    from app.viewer import timing

    clock = FrameClock()
    st = _frame(0.0, cull_ms=50.0)
    clock.begin(st, 1.0, timing.COMPILES.total_ms - 40.0)  # as if 40 ms compiled since
    clock.end_passes(st)
    assert st.compile_ms >= 40.0 and st.stall.startswith("compile") and st.stall_ms == 0.0


def test_compile_clock_counts_nested_compiles_once():
    c = CompileClock()
    c.started()
    c.started()  # a kernel compiling the kernels it calls
    c.ended()
    inner_total = c.total_ms
    c.ended()
    assert inner_total == 0.0 and c.total_ms >= 0.0 and c.kernels == 2
    assert c._depth == {}


def test_history_keeps_the_last_frames_oldest_first():
    h = FrameHistory(size=4)
    for k in range(6):
        st = FrameStats(draw_ms=float(k), frame_ms=float(k), stall="x" if k == 5 else "")
        h.push(st)
    np.testing.assert_array_equal(h.frame_ms(), [2.0, 3.0, 4.0, 5.0])
    np.testing.assert_array_equal(h.stalls(), [False, False, False, True])
    assert h.stages().shape == (4, len(TIME_STAGES))


def test_graph_scale_holds_nine_frames_in_ten_and_stalls_stick_out():
    assert graph_scale(np.zeros(0)) == 50.0
    assert graph_scale(np.full(100, 20.0)) == 50.0
    frames = np.r_[np.full(95, 60.0), np.full(5, 900.0)]
    assert graph_scale(frames) == 100.0


def test_graph_bars_stack_the_stages_to_the_frame_time_newest_at_the_right():
    rect = GraphRect(100.0, 50.0, 300.0, 100.0)
    stages = np.array([[10.0, 5.0], [20.0, 30.0]])  # two frames, two stages
    colors = [(1.0, 0.0, 0.0, 1.0), (0.0, 1.0, 0.0, 1.0)]
    v = graph_quads(stages, np.array([False, True]), rect, 100.0, colors, capacity=300)
    quads = v.reshape(-1, 6, 6)
    # the panel first, then four bar segments, one stall mark, two budget lines
    assert quads.shape[0] == 1 + 4 + 1 + len(BUDGETS_MS)
    bars = quads[1:5]
    heights = bars[:, :, 1].max(axis=1) - bars[:, :, 1].min(axis=1)
    np.testing.assert_allclose(heights, [10.0, 5.0, 20.0, 30.0], atol=1e-4)  # 1 px per ms
    # the second frame is the newest: its bar ends at the right edge, one pixel wide
    assert bars[3, :, 0].max() == rect.x + rect.w and bars[3, :, 0].min() == rect.x + rect.w - 1
    # the stack's top is the frame time above the bottom
    assert abs((rect.y + rect.h) - bars[3, :, 1].min() - 50.0) < 1e-4
    mark = quads[5]
    np.testing.assert_allclose(mark[0, 2:], STALL_RGBA)
    assert mark[:, 1].min() == rect.y  # at the top of the graph
    for q, ms in zip(quads[6:], BUDGETS_MS, strict=True):
        assert abs(q[:, 1].mean() - (rect.y + rect.h - ms)) < 1e-4


def test_graph_bars_are_clipped_at_the_top():
    rect = GraphRect(0.0, 0.0, 300.0, 100.0)
    v = graph_quads(np.array([[400.0, 400.0]]), np.array([True]), rect, 50.0,
                    [(1, 0, 0, 1), (0, 1, 0, 1)], capacity=300).reshape(-1, 6, 6)
    assert v[:, :, 1].min() >= rect.y - 2  # the panel's margin only


def test_graph_fits_beside_its_legend_on_a_small_screen():
    r = graph_layout((640, 360), legend_w=200.0, title_h=20.0)
    assert r.x - 200.0 >= 8 and r.x + r.w <= 640 and r.y >= 20 and r.y + r.h <= 360
    assert r.w >= 300 and r.h >= 60
    cols = legend_columns(11, 6)
    assert [len(c) for c in cols] == [6, 5]
    assert sorted(i for c in cols for i in c) == list(range(11))
