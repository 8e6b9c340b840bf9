"""``python -m app bench nested``: a scene of G groups of M objects, a fraction of the groups
turning every frame and some objects moving inside their groups (issue 15).

Three ways to cull the same scene, per frame (transform/update + query), same run:

* ``nested/...``: :class:`app.spatial.nested.NestedIndex`; a turning group costs one
  transform (``set_transforms`` of all of them in one batch), a moving object one local update
  (``update(None, ...)``, one batch), then ``query_frustum``. ``nested/brute`` scans each
  partly visible group inside the compiled descent; ``nested/<kind>-inner`` asks every partly
  visible group through its own index (``inner_min=0``): one Python call per such group,
  which is what the first variant avoids;
* ``flat/<kind>``: the same objects flattened into one world-space index: every object of a
  turning group gets a new world centre every frame (a compiled pass over the hierarchy's
  local positions), and those plus the movers go to ``update``;
* ``numba-brute`` / ``numba-brute-mt``: the compiled brute force of ``app/bench/baselines.py``
  over world spheres, its world centres recomputed by the same compiled pass.

Every subject's visible set is compared with ``numba-brute``'s, exactly, every frame (all of
them compute world spheres the canonical way of ``app.spatial.nested.groups``). The motion
itself (new local positions, new transforms) is computed before the frames and not timed.
"""

from __future__ import annotations

import gc
import math
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numba import njit

from app.bench.baselines import ScanBrute, ScanBruteParallel
from app.culling.frustum import camera_planes
from app.spatial import INDEX_NAMES, create_index
from app.spatial.nested import NestedIndex
from app.spatial.scan import to32

FULL_SIZES = ((100, 1000), (1000, 1000))
QUICK_SIZES = ((20, 300), (60, 300))
SWEEP = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)
QUICK_SWEEP = (0.05, 0.2, 1.0)
GOAL = 5.0  # nested >= 5x flattened and >= 5x compiled brute force at 10 % turning
#: Frames run but not measured at the start of every fraction, for every subject: the goal is
#: about a scene that keeps turning, and a nested index has a one-time start (it packs its
#: steady movers at the third batch, then its caches fill: the first frames after it are up to
#: 2x slower); the brute force has none. Medians are over the frames after these.
WARMUP = 5
STEP = 0.1  # movers' random-walk step (units per frame, per axis)
SPIN = 0.02  # radians per frame of a turning group


# ----------------------------------------------------------------- the scene


@dataclass
class NestedScene:
    """G groups of M objects: ids g*M .. g*M+M-1 in group g, in a ball around its origin."""

    G: int
    M: int
    local: np.ndarray  # (n, 3) local centres (the start)
    radius: np.ndarray  # (n,) local radii
    grp: np.ndarray  # (n,) group of each object
    pos: np.ndarray  # (G, 3) group origins
    scale: np.ndarray  # (G,) uniform scales
    axis: np.ndarray  # (G, 3) unit spin axes
    angle0: np.ndarray  # (G,) start angles
    side: float  # the cube the groups lie in
    rg: float  # local radius of a group

    @property
    def n(self) -> int:
        return self.G * self.M

    def transforms(self, groups: np.ndarray, t: float) -> np.ndarray:
        """(K, 4, 4) transforms of ``groups`` after turning ``t`` frames."""
        k = self.axis[groups]
        a = self.angle0[groups] + SPIN * t
        c, s = np.cos(a), np.sin(a)
        K = np.zeros((len(groups), 3, 3))
        K[:, 0, 1], K[:, 0, 2], K[:, 1, 2] = -k[:, 2], k[:, 1], -k[:, 0]
        K[:, 1, 0], K[:, 2, 0], K[:, 2, 1] = k[:, 2], -k[:, 1], k[:, 0]
        R = np.eye(3) + s[:, None, None] * K + (1 - c)[:, None, None] * (K @ K)
        M = np.zeros((len(groups), 4, 4))
        M[:, :3, :3] = self.scale[groups, None, None] * R
        M[:, :3, 3] = self.pos[groups]
        M[:, 3, 3] = 1.0
        return M

    def planes(self, f: int) -> np.ndarray:
        """The camera of frame ``f``: at the centre, 60 degrees, far 0.3 side, turning."""
        eye = np.full(3, self.side / 2)
        yaw = 2 * math.pi * f / 400.0
        target = eye + np.array([math.cos(yaw), math.sin(yaw), 0.15])
        return camera_planes(eye, target, fovy_deg=60.0, aspect=16 / 9, near=0.1,
                             far=0.3 * self.side)


def make_scene(G: int, M: int, seed: int = 3) -> NestedScene:
    """G groups of M objects (uniform in a ball of radius 2.5 M^(1/3), radii 0.3-1.5) at
    random places in a cube holding the groups about 3 group radii apart."""
    rng = np.random.default_rng(seed)
    rg = 2.5 * M ** (1 / 3)
    u = rng.normal(size=(G * M, 3))
    u /= np.linalg.norm(u, axis=1)[:, None]
    local = u * (rg * rng.random(G * M) ** (1 / 3))[:, None]
    side = 3.0 * rg * G ** (1 / 3)
    axis = rng.normal(size=(G, 3))
    axis /= np.linalg.norm(axis, axis=1)[:, None]
    return NestedScene(G, M, local, rng.uniform(0.3, 1.5, G * M),
                       np.repeat(np.arange(G, dtype=np.int64), M), rng.uniform(0, side, (G, 3)),
                       rng.uniform(0.8, 1.25, G), axis, rng.uniform(0, 2 * math.pi, G), side, rg)


@dataclass
class Frames:
    """One run's inputs: which groups turn, which objects move, and every frame's values."""

    turning: np.ndarray  # sorted group numbers
    movers: np.ndarray  # sorted object ids
    affected: np.ndarray  # sorted ids whose world centre changes: turning groups' + movers
    mats: list[np.ndarray]  # per frame (T, 4, 4)
    moved: list[np.ndarray]  # per frame (K, 3) new local centres of the movers
    t0: int  # global frame number of the first frame


def make_frames(sc: NestedScene, turning: float, moving: float, frames: int, t0: int,
                start_local: np.ndarray, seed: int = 5) -> Frames:
    """``frames`` frames from global frame ``t0``; movers walk from ``start_local``."""
    rng = np.random.default_rng(seed)
    nt = 0 if turning <= 0 else max(1, round(turning * sc.G))
    turn = np.sort(rng.choice(sc.G, nt, replace=False)).astype(np.int64)
    nm = round(moving * sc.n)
    movers = np.sort(rng.choice(sc.n, nm, replace=False)).astype(np.int64)
    mask = np.zeros(sc.n, bool)
    mask[movers] = True
    mask[(turn[:, None] * sc.M + np.arange(sc.M)).ravel()] = True
    cur = start_local[movers].copy()
    moved = []
    for _ in range(frames):
        cur = cur + rng.normal(size=cur.shape) * STEP
        moved.append(cur.copy())
    mats = [sc.transforms(turn, t0 + f) for f in range(frames)]
    return Frames(turn, movers, np.flatnonzero(mask).astype(np.int64), mats, moved, t0)


@njit(cache=True)
def world_centres(ids, grp, local, W, out) -> None:
    """World centres of ``ids`` into ``out``: the canonical ``W[g] c`` of each object. Sorted
    ids of a group come in runs: the group's matrix is loaded once per run."""
    prev = -1
    w00 = w01 = w02 = w03 = w10 = w11 = w12 = w13 = w20 = w21 = w22 = w23 = 0.0
    for i in range(ids.shape[0]):
        k = ids[i]
        g = grp[k]
        if g != prev:
            w00, w01, w02, w03 = W[g, 0, 0], W[g, 0, 1], W[g, 0, 2], W[g, 0, 3]
            w10, w11, w12, w13 = W[g, 1, 0], W[g, 1, 1], W[g, 1, 2], W[g, 1, 3]
            w20, w21, w22, w23 = W[g, 2, 0], W[g, 2, 1], W[g, 2, 2], W[g, 2, 3]
            prev = g
        x = local[k, 0]
        y = local[k, 1]
        z = local[k, 2]
        out[i, 0] = ((w00 * x + w01 * y) + w02 * z) + w03  # world_point's order
        out[i, 1] = ((w10 * x + w11 * y) + w12 * z) + w13
        out[i, 2] = ((w20 * x + w21 * y) + w22 * z) + w23


@njit(cache=True)
def brute_world(ids, grp, local, W, c64, x32, y32, z32) -> float:
    """The brute force's own pass: world centres of ``ids`` (rows = ids) written straight
    into its float64 rows and float32 copy, matrices loaded once per run of a group;
    returns the largest coordinate magnitude written."""
    prev = -1
    w00 = w01 = w02 = w03 = w10 = w11 = w12 = w13 = w20 = w21 = w22 = w23 = 0.0
    bx = by = bz = 0.0
    for i in range(ids.shape[0]):
        k = ids[i]
        g = grp[k]
        if g != prev:
            w00, w01, w02, w03 = W[g, 0, 0], W[g, 0, 1], W[g, 0, 2], W[g, 0, 3]
            w10, w11, w12, w13 = W[g, 1, 0], W[g, 1, 1], W[g, 1, 2], W[g, 1, 3]
            w20, w21, w22, w23 = W[g, 2, 0], W[g, 2, 1], W[g, 2, 2], W[g, 2, 3]
            prev = g
        x = local[k, 0]
        y = local[k, 1]
        z = local[k, 2]
        wx = ((w00 * x + w01 * y) + w02 * z) + w03
        wy = ((w10 * x + w11 * y) + w12 * z) + w13
        wz = ((w20 * x + w21 * y) + w22 * z) + w23
        c64[k, 0] = wx
        c64[k, 1] = wy
        c64[k, 2] = wz
        x32[k] = to32(wx)
        y32[k] = to32(wy)
        z32[k] = to32(wz)
        bx = max(bx, abs(wx))
        by = max(by, abs(wy))
        bz = max(bz, abs(wz))
    return max(bx, by, bz)


# ----------------------------------------------------------------- subjects


class NestedSubject:
    """The nested index over the scene's groups."""

    def __init__(self, kind: str, inner_min: int | None) -> None:
        self.h = NestedIndex(kind, inner_min=inner_min)
        self.extra: dict[str, Any] = {}

    def build(self, sc: NestedScene) -> None:
        mats = sc.transforms(np.arange(sc.G), 0)
        for g in range(sc.G):
            self.h.add_group(g, None, mats[g])
        for g in range(sc.G):
            lo = g * sc.M
            self.h.insert(g, np.arange(lo, lo + sc.M, dtype=np.int64), sc.local[lo:lo + sc.M],
                          sc.radius[lo:lo + sc.M])

    def begin(self, fr: Frames) -> None:
        self._gids = fr.turning.tolist()

    def update(self, fr: Frames, f: int, local: np.ndarray) -> None:
        if self._gids:
            self.h.set_transforms(self._gids, fr.mats[f])
        if fr.movers.shape[0]:
            self.h.update(None, fr.movers, fr.moved[f])

    def query(self, planes: np.ndarray):
        res = self.h.query_frustum(planes)
        self.extra = res.extra
        return res


class WorldSubject:
    """A world-space structure (a flat index or a brute-force peer): every frame the world
    centres of the affected objects are recomputed from the hierarchy and written to it."""

    def __init__(self, factory: Callable[[], Any]) -> None:
        self.idx = factory()
        self.extra: dict[str, Any] = {}

    def build(self, sc: NestedScene) -> None:
        mats = sc.transforms(np.arange(sc.G), 0)
        self.W = np.ascontiguousarray(mats[:, :3, :])
        self.grp = sc.grp
        ids = np.arange(sc.n, dtype=np.int64)
        wc = np.empty((sc.n, 3))
        world_centres(ids, self.grp, sc.local, self.W, wc)
        self.idx.insert(ids, wc, sc.scale[sc.grp] * sc.radius)

    def begin(self, fr: Frames) -> None:
        self._buf = np.empty((fr.affected.shape[0], 3))

    def update(self, fr: Frames, f: int, local: np.ndarray) -> None:
        if fr.turning.shape[0]:
            self.W[fr.turning] = fr.mats[f][:, :3, :]
        if fr.affected.shape[0]:
            world_centres(fr.affected, self.grp, local, self.W, self._buf)
            self.idx.update(fr.affected, self._buf)

    def query(self, planes: np.ndarray):
        return self.idx.query_frustum(planes)


class BruteSubject(WorldSubject):
    """Compiled brute force over world spheres: the world centres of the affected objects
    computed and written into its arrays in one fused pass (no id look-up, no buffer)."""

    def update(self, fr: Frames, f: int, local: np.ndarray) -> None:
        if fr.turning.shape[0]:
            self.W[fr.turning] = fr.mats[f][:, :3, :]
        if fr.affected.shape[0]:
            p = self.idx
            s = p._s32
            big = brute_world(fr.affected, self.grp, local, self.W, p._c64, s.x, s.y, s.z)
            p._max_abs = max(p._max_abs, float(big))


def subject_factories(flat: list[str], inner: list[str]) -> list[tuple[str, Callable[[], Any]]]:
    """(label, factory) of every subject; ``numba-brute`` first (the reference)."""
    out: list[tuple[str, Callable[[], Any]]] = [
        ("numba-brute", lambda: BruteSubject(ScanBrute)),
        ("numba-brute-mt", lambda: BruteSubject(ScanBruteParallel)),
    ]
    for k in flat:
        out.append((f"flat/{k}", lambda k=k: WorldSubject(lambda: create_index(k))))
    for v in inner:
        kind, _, tail = v.partition("-")
        inner_min = 0 if tail == "inner" else None
        out.append((f"nested/{v}", lambda kind=kind, m=inner_min: NestedSubject(kind, m)))
    return out


def check_variants(flat: list[str], inner: list[str]) -> str | None:
    """A message for an unknown flat index or nested variant, or None."""
    for k in flat:
        if k not in INDEX_NAMES:
            return f"unknown flat index {k!r}; choose from {', '.join(INDEX_NAMES)}"
    for v in inner:
        kind, _, tail = v.partition("-")
        if kind not in INDEX_NAMES or tail not in ("", "inner"):
            return (f"unknown nested variant {v!r}: an index name ({', '.join(INDEX_NAMES)}), "
                    "optionally with -inner")
    return None


# ----------------------------------------------------------------- running


@dataclass
class NestedRow:
    G: int
    M: int
    turning: float
    subject: str
    build_s: float = float("nan")
    update_ms: float = float("nan")
    query_ms: float = float("nan")
    frame_ms: float = float("nan")
    visible: int = 0
    working_set: int = 0
    nodes: int = 0
    inner_queries: float = 0.0
    frames: int = 0
    exact: str = ""
    error: str = ""
    x_nested: float = float("nan")  # this subject's frame time / the best nested one's
    extra: dict = field(default_factory=dict)


def _warm(factories: list[tuple[str, Callable[[], Any]]], moving: float) -> None:
    """Compile every subject's kernels on a tiny scene, so no timing includes compilation."""
    sc = make_scene(4, 50, seed=1)
    fr = make_frames(sc, 0.5, max(moving, 0.05), 4, 0, sc.local)
    for _, factory in factories:
        s = factory()
        s.build(sc)
        s.begin(fr)
        local = sc.local.copy()
        for f in range(4):  # four: the nested index packs steady movers at the third batch
            local[fr.movers] = fr.moved[f]
            s.update(fr, f, local)
            s.query(sc.planes(f))


def run(sizes: list[tuple[int, int]], turnings: list[float], moving: float, frames: int,
        flat: list[str], inner: list[str], progress: Callable[[str], None] = print,
        clock: str = "wall") -> list[NestedRow]:
    """Every subject on every size, each turning fraction in turn (the scene carries on from
    one fraction to the next, the same for every subject); medians over ``frames`` frames
    after :data:`WARMUP` frames per fraction; ``clock`` "wall" or "cpu" (process CPU time: robust
    on a busy machine, but it adds up the threads of numba-brute-mt)."""
    timer = time.process_time if clock == "cpu" else time.perf_counter
    factories = subject_factories(flat, inner)
    progress("compiling ...")
    _warm(factories, moving)
    rows: list[NestedRow] = []
    for G, M in sizes:
        sc = make_scene(G, M)
        # every fraction's frames, chained: the movers walk on, the global frame count too
        runs: list[Frames] = []
        local = sc.local.copy()
        t0 = 1
        for k, tf in enumerate(turnings):
            fr = make_frames(sc, tf, moving, WARMUP + frames, t0, local, seed=100 + k)
            local[fr.movers] = fr.moved[-1]
            runs.append(fr)
            t0 += WARMUP + frames
        truth: dict[tuple[int, int], np.ndarray] = {}
        for label, factory in factories:
            progress(f"{G} x {M}: {label}")
            rows += _run_subject(sc, runs, turnings, label, factory, frames, truth, timer)
            gc.collect()
        for tf in turnings:
            here = [r for r in rows if r.G == G and r.M == M and r.turning == tf and not r.error]
            best = min((r.frame_ms for r in here if r.subject.startswith("nested/")),
                       default=float("nan"))
            for r in here:
                r.x_nested = r.frame_ms / best
    return rows


def _run_subject(sc: NestedScene, runs: list[Frames], turnings: list[float], label: str,
                 factory: Callable[[], Any], frames: int,
                 truth: dict[tuple[int, int], np.ndarray],
                 timer: Callable[[], float] = time.perf_counter) -> list[NestedRow]:
    out = []
    try:
        s = factory()
        t = time.perf_counter()
        s.build(sc)
        build = time.perf_counter() - t
    except Exception as e:  # a failing subject is reported, the others still run
        traceback.print_exc()
        return [NestedRow(sc.G, sc.M, tf, label, error=f"{type(e).__name__}: {e}")
                for tf in turnings]
    local = sc.local.copy()
    for k, (tf, fr) in enumerate(zip(turnings, runs, strict=True)):
        row = NestedRow(sc.G, sc.M, tf, label, build_s=build)
        upd, qry, vis, work, nodes, inner = [], [], [], [], [], []
        bad = []
        try:
            s.begin(fr)
            for f in range(WARMUP + frames):
                local[fr.movers] = fr.moved[f]  # the motion: not timed
                planes = sc.planes(fr.t0 + f)
                t = timer()
                s.update(fr, f, local)
                t1 = timer()
                res = s.query(planes)
                t2 = timer()
                got = np.sort(np.asarray(res.visible, dtype=np.int64))
                key = (k, f)
                if key not in truth:
                    truth[key] = got
                elif not np.array_equal(got, truth[key]):
                    bad.append(f)
                if f < WARMUP:
                    continue  # the warm-up frames of this fraction
                upd.append(t1 - t)
                qry.append(t2 - t1)
                vis.append(got.shape[0])
                work.append(res.working_set)
                nodes.append(res.nodes_visited)
                inner.append(getattr(s, "extra", {}).get("inner_queries", 0))
        except Exception as e:
            traceback.print_exc()
            row.error = f"{type(e).__name__}: {e}"
            out.append(row)
            continue
        frame = [a + b for a, b in zip(upd, qry, strict=True)]
        row.update_ms = 1e3 * float(np.median(upd))
        row.query_ms = 1e3 * float(np.median(qry))
        row.frame_ms = 1e3 * float(np.median(frame))
        row.visible = int(np.median(vis))
        row.working_set = int(np.median(work))
        row.nodes = int(np.median(nodes))
        row.inner_queries = float(np.mean(inner))
        row.frames = len(frame)
        row.exact = "yes" if not bad else f"NO ({len(bad)} frames)"
        out.append(row)
    return out


# ----------------------------------------------------------------- reporting

HEADERS = ["turning", "subject", "build s", "update ms", "query ms", "frame ms", "x nested",
           "visible", "working set", "nodes", "inner q", "exact"]


def table_rows(rows: list[NestedRow], G: int, M: int) -> list[list]:
    """Rows of one scene size for report.text_table / md_table."""
    out = []
    for r in rows:
        if (r.G, r.M) != (G, M):
            continue
        if r.error:
            out.append([f"{r.turning:g}", r.subject, "", "", "", "", "", "", "", "", "",
                        r.error])
            continue
        out.append([f"{r.turning:g}", r.subject, r.build_s, r.update_ms, r.query_ms, r.frame_ms,
                    f"{r.x_nested:.2f}x", r.visible, r.working_set, r.nodes,
                    f"{r.inner_queries:.0f}", r.exact])
    return out


def csv_rows(rows: list[NestedRow]) -> tuple[list[str], list[list]]:
    """(header, rows) of every measurement for a CSV file."""
    h = ["groups", "per_group", "turning", "subject", "build_s", "update_ms", "query_ms",
         "frame_ms", "x_nested", "visible", "working_set", "nodes", "inner_queries", "frames",
         "exact", "error"]
    return h, [[r.G, r.M, r.turning, r.subject, r.build_s, r.update_ms, r.query_ms, r.frame_ms,
                r.x_nested, r.visible, r.working_set, r.nodes, r.inner_queries, r.frames, r.exact,
                r.error] for r in rows]


def _best(rows: list[NestedRow], prefix: str) -> NestedRow | None:
    ok = [r for r in rows if r.subject.startswith(prefix) and not r.error]
    return min(ok, key=lambda r: r.frame_ms) if ok else None


def goal_lines(rows: list[NestedRow], turning: float = 0.1) -> list[str]:
    """The issue's goal at ``turning``, per size: best nested against the best flattened index
    and the faster compiled brute force, PASS / MISS at :data:`GOAL`."""
    out = []
    for G, M in sorted({(r.G, r.M) for r in rows}):
        here = [r for r in rows if (r.G, r.M) == (G, M) and r.turning == turning]
        nest = _best(here, "nested/")
        if nest is None:
            continue
        parts = []
        for name, prefix in (("flattened", "flat/"), ("compiled brute force", "numba-brute")):
            peer = _best(here, prefix)
            if peer is None:
                continue
            x = peer.frame_ms / nest.frame_ms
            parts.append(f"{x:.1f}x {name} ({peer.subject} {peer.frame_ms:.2f} ms) "
                         f"{'PASS' if x >= GOAL else 'MISS'}")
        out.append(f"{G} x {M:,}, {turning:g} turning: {nest.subject} {nest.frame_ms:.3f} ms; "
                   + "; ".join(parts))
    return out


def crossover_lines(rows: list[NestedRow]) -> list[str]:
    """Per size, how the best nested compares with the best flat index and the faster brute
    force as the turning fraction falls: the ratio at every fraction and where it crosses 1."""
    out = []
    for G, M in sorted({(r.G, r.M) for r in rows}):
        fracs = sorted({r.turning for r in rows if (r.G, r.M) == (G, M)}, reverse=True)
        if len(fracs) < 2:
            continue
        for name, prefix in (("flattened", "flat/"), ("brute force", "numba-brute")):
            ratios = []
            for tf in fracs:
                here = [r for r in rows if (r.G, r.M) == (G, M) and r.turning == tf]
                nest, peer = _best(here, "nested/"), _best(here, prefix)
                if nest and peer:
                    ratios.append((tf, peer.frame_ms / nest.frame_ms))
            if not ratios:
                continue
            text = ", ".join(f"{tf:g}: {x:.1f}x" for tf, x in ratios)
            below = [tf for tf, x in ratios if x < 1.0]
            cross = (f"nested slower than the {name} from {max(below):g} turning down"
                     if below else f"nested faster at every fraction measured (down to "
                     f"{fracs[-1]:g})")
            out.append(f"{G} x {M:,} vs {name}: {text} -> {cross}")
    return out



def overhead_lines(rows: list[NestedRow]) -> list[str]:
    """What asking partly visible groups through their own index costs per group and frame:
    (query time of a ``-inner`` variant - the scanning variant's) / its inner queries."""
    out = []
    for G, M in sorted({(r.G, r.M) for r in rows}):
        for tf in sorted({r.turning for r in rows if (r.G, r.M) == (G, M)}, reverse=True):
            here = [r for r in rows if (r.G, r.M) == (G, M) and r.turning == tf and not r.error]
            scan = [r for r in here if r.subject.startswith("nested/") and "-inner" not in
                    r.subject]
            if not scan:
                continue
            base = min(r.query_ms for r in scan)
            for r in here:
                if r.subject.endswith("-inner") and r.inner_queries > 0:
                    per = 1e3 * (r.query_ms - base) / r.inner_queries
                    out.append(f"{G} x {M:,}, {tf:g} turning: {r.subject} {r.inner_queries:.0f} "
                               f"inner queries a frame, {per:.0f} us each over the scan "
                               f"({r.query_ms:.2f} against {base:.2f} ms)")
    return out
