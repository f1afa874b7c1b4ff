"""Work budgets: how much one user action, and one session, may ask of the server.

Every action is priced in *work units*, calibrated so that one unit is about one
nanosecond of one core of the 2-core machines this was measured on (float64, JAX on CPU,
Clarabel via cvxpy). With K = 1 for single-query problems (K = T for sequence/causal ones)
and m the rank of K, Q:

    GD      work = runs · steps · (n·K·T·d + 4·d² + [param="KQ"] d²·m / 4); for W-GD in
            the engine's span form (`span_pays`, at the sweeps' 128 runs a call) the
            smaller of that and p·n·K·T + 4·p, p = min(d², n·K·T)
    SVM     work = solves · price of the method `solve_att_svm` takes (`svm_work`):
            Clarabel (`clarabel_work`) while that is at most `CLARABEL_MAX_WORK`, with
            r = n·K·(T − 1) constraints (≈ half if causal), cost = 5·10⁶ +
            Frobenius (a QP in the r dual multipliers):   r³ + r²·d²/4 + 200·r·d²
            nuclear (an LMI of size s = min(d, r) + min(d, n·K)):
                                              4·10⁻⁴ · s^5.5 · r^1.45 + 3000·r·d²;
            above it the certified solvers of `attsvm.pairsvm` (`pairs_work`)
    bulk SVM (the sweeps' exact solvers) and the regularization path's sphere
    minimizations: `bulk_svm_work`, `sphere_work`.

The first GD term is the attention forward/backward pass, the d² terms the update of W
(and the product K Qᵀ). Clarabel's prices follow `attsvm.svm`'s dual formulations: the
Frobenius dual's dense KKT system and Gram matrix, and the nuclear dual's semidefinite
cone, whose size is the rank of the token differences plus the rank of the queries. They
were fitted to solve times measured here (e.g. (n, T, d) = (32, 32, 32): Frobenius 1.2 s,
nuclear 50–65 s; (16, 16, 48) nuclear 6–8 s; (4, 4, 64) nuclear 0.1–0.3 s), erring
high rather than low.
W-GD with 20 runs of (4, 4, 64) × 2000 steps takes 0.6 s (formula: 0.7 s).

Two modes, chosen by ``ATTSVM_MODE`` (Streamlit also exports a root-level
``ATTSVM_MODE = "hosted"`` in ``.streamlit/secrets.toml`` to the environment):

- "local" (default): generous caps for a researcher's own machine;
- "hosted": caps for a shared server, so that one visitor's action takes a few seconds and
  cannot starve the others. It also sets each session's compute time over a rolling
  window, each action's wall-clock time, and how many actions compute at once (the app
  enforces those three: `ui.budget`).

Refusals raise `BudgetError` (a ValueError, so pages show it like any bad input) naming
the setting, the cap and the largest size that fits.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

MODES = ("local", "hosted")
NS = 1e-9  # seconds per work unit on the reference machine
MAX_RECORD_FLOATS = 60_000_000  # float64 numbers one GD call may record (≈ 480 MB), any mode
# What the library accepts at all, any mode (docs/theory.md §A.3): `Problem` and
# `random_problem` refuse larger sizes. Each mode's caps (`Limits.max_n`, …) lie below these.
MAX_N, MAX_T, MAX_D = 512, 256, 512


class BudgetError(ValueError):
    """A request over the active mode's budget (or a server too busy to take it)."""


@dataclass(frozen=True, kw_only=True)
class Limits:
    """Caps of one mode.

    Attributes:
        max_work: work units (module doc) one action may cost, GD and SVMs together.
        max_runs, max_steps, max_n, max_T, max_d: hard caps on single settings.
        max_svm_solves: SVM solves one action may ask for.
        max_record_floats: float64 numbers one action may record (trajectory memory).
        max_upload_bytes: size of one uploaded file.
        action_seconds: wall-clock time after which a long action (a sweep, a live run) is
            stopped, keeping what it has.
        session_seconds, session_window: compute seconds one session may use within any
            `session_window` seconds (inf: no limit).
        max_concurrent: actions computing at once, server-wide (0: no limit); others wait
            up to `queue_seconds` for a slot.
    """

    mode: str
    max_work: float
    max_runs: int
    max_steps: int
    max_n: int
    max_T: int
    max_d: int
    max_svm_solves: int
    max_record_floats: int
    max_upload_bytes: int
    action_seconds: float
    session_seconds: float
    session_window: float
    max_concurrent: int
    queue_seconds: float


LIMITS = {
    "local": Limits(
        mode="local",
        max_work=1e12,
        max_runs=5000,
        max_steps=200_000,
        max_n=256,
        max_T=128,
        max_d=256,
        max_svm_solves=20_000,
        max_record_floats=MAX_RECORD_FLOATS,
        max_upload_bytes=100 * 2**20,
        action_seconds=3600.0,
        session_seconds=math.inf,
        session_window=600.0,
        max_concurrent=0,
        queue_seconds=0.0,
    ),
    "hosted": Limits(
        mode="hosted",
        max_work=3e9,
        max_runs=500,
        max_steps=20_000,
        max_n=64,
        max_T=64,
        max_d=128,
        max_svm_solves=2000,
        max_record_floats=2_000_000,
        max_upload_bytes=2 * 2**20,
        action_seconds=30.0,
        session_seconds=120.0,
        session_window=600.0,
        max_concurrent=2,
        queue_seconds=30.0,
    ),
}


def mode() -> str:
    """The active mode: ATTSVM_MODE (default "local"; unknown values mean "local")."""
    m = os.environ.get("ATTSVM_MODE", "local").strip().lower()
    return m if m in MODES else "local"


def current() -> Limits:
    return LIMITS[mode()]


# -- padding buckets and the engine's program choice (attsvm.batching, attsvm.training) --
_BUCKETS = (
    1,
    2,
    3,
    4,
    5,
    6,
    8,
    10,
    12,
    16,
    20,
    24,
    32,
    40,
    48,
    64,
    80,
    96,
    128,
    160,
    192,
    256,
    320,
    384,
    512,
)


def bucket(x: int) -> int:
    """The padded size used for a dimension of size `x`."""
    for b in _BUCKETS:
        if b >= x:
            return b
    return x


SPAN_RULES = ("gd", "ngd", "polyak")  # steps along ∇L itself: W − W0 stays in the span
SWEEP_CHUNK = 128  # runs per compiled call of a CPU sweep, at most (experiments.core)
SPAN_MAX_FLOATS = 2**23  # the span form's basis for one call, at most (64 MB; its SVD ~3×),
#                           and never more than the mode's recorded numbers (hosted: 16 MB)


def span_pays(n: int, K: int, T: int, d: int, record_every: int, steps: int, runs: int = 1) -> bool:
    """Whether the span form (`batching.span_basis`) is the faster program for `runs` runs
    of these padded sizes: it must shrink W (p = min(d², n·K·T) < d²); its basis
    (runs·n·K·T·d² numbers, an SVD each) must fit in `SPAN_MAX_FLOATS` and in the mode's
    `max_record_floats` (a hosted visitor's call holds no more than its records); and its
    step's p·n·K·T multiply-adds each way, plus d²·p to rebuild each recorded W and the SVD's
    4·n·K·T·p·d² spread over the steps, must stay within twice the plain form's
    n·K·d² + n·K·T·d. The factor is fitted to this machine's timings (docs/performance.md):
    faster from d = 4 on at n = 3, T = 4 (0.62 → 0.36 µs per run-step at d = 4, 0.75 → 0.31
    at d = 10), and from d = 12 on at n = 6, T = 8 (2.35 → 2.11 at d = 12, 3.7 → 3.0 at
    d = 20; with 2000 steps the SVD leaves it d ≥ 15 there)."""
    m = n * K * T
    p = min(d * d, m)
    if p >= d * d or runs * m * d * d > min(SPAN_MAX_FLOATS, current().max_record_floats):
        return False
    span = p * m + d * d * p / record_every + 4 * m * p * d * d / steps
    return span <= 2 * (n * K * d * d + m * d)


# -- prices -------------------------------------------------------------------------------
def _K(T: int, queries: str) -> int:
    return 1 if queries == "single" else T


def gd_work(
    *,
    n: int,
    T: int,
    d: int,
    steps: int,
    runs: int = 1,
    queries: str = "single",
    param: str = "W",
    m: int | None = None,
    record_every: int | None = None,
    optimizer: str = "ngd",
) -> float:
    """Work units of `runs` GD runs of `steps` steps (module doc). With `record_every`
    given, W-GD by a rule that stays in the span (gd, ngd, polyak) is priced in the span
    form where the engine takes it (measured here: n = 3, T = 4, d = 10, 0.31 µs per
    run-step against 0.75 plain; the formula 192 against 520 units)."""
    m = d if m is None else m
    per = n * _K(T, queries) * T * d + 4 * d * d + (d * d * m / 4 if param == "KQ" else 0)
    if param == "W" and record_every and optimizer in SPAN_RULES:
        nb, Tb, db = bucket(n), bucket(T), bucket(d)
        Kb = _K(Tb, queries)
        if span_pays(nb, Kb, Tb, db, record_every, steps, min(runs, SWEEP_CHUNK)):
            p = min(db * db, nb * Kb * Tb)
            per = min(per, p * nb * Kb * Tb + 4 * p)
    return float(runs) * steps * per


def _constraints(n: int, T: int, queries: str) -> float:
    """Number of Att-SVM constraints r: one per (query, non-selected token)."""
    if queries == "causal":
        return n * T * max(T - 1, 0) / 2
    return n * _K(T, queries) * max(T - 1, 0)


def _queries(n: int, T: int, queries: str) -> int:
    return n * _K(T, queries)


def clarabel_pairs_work(*, m: float, d: int, d2: int, q: int, norm: str = "fro") -> float:
    """Work units of one attention SVM by cvxpy + Clarabel with m constraints, W (d, d2) and
    q distinct queries (module doc; the LMI's size is min(d, m) + min(d2, q))."""
    if norm == "fro":
        cost = m**3 + m * m * d * d2 / 4 + 200 * m * d * d2
    else:
        s = min(d, m) + min(d2, q)
        cost = 4e-4 * s**5.5 * m**1.45 + 3000 * m * d * d2
    return 5e6 + cost


def clarabel_work(
    *, n: int, T: int, d: int, norm: str = "fro", queries: str = "single", solves: int = 1
) -> float:
    """Work units of `solves` attention-SVM solves by cvxpy + Clarabel (module doc)."""
    r = _constraints(n, T, queries)
    return float(solves) * clarabel_pairs_work(m=r, d=d, d2=d, q=_queries(n, T, queries), norm=norm)


# `solve_att_svm`'s "auto": Clarabel where its price is at most this many work units (it is
# exact there and keeps the numbers `reproduce` prints), the certified solvers of
# `attsvm.pairsvm` above: 0.2 s for the Frobenius SVM (Newton's solution is exact to ~1e-14),
# 2 s for the nuclear one (past its KKT Newton's size the ALM's gap is ~1e-7, Clarabel's ~1e-10)
CLARABEL_MAX_WORK = {"fro": 2e8, "nuc": 2e9}
# `attsvm.pairsvm.pick_solver`: the exact LDP where W's reduced space has at most LDP_MAX_DIM
# entries (above, its active set grows past what Newton needs) and its (m, p) rows fit
LDP_MAX_DIM = 512
LDP_MAX_ENTRIES = 10_000_000


NUC_FALLBACK_WORK = CLARABEL_MAX_WORK["nuc"]
# `attsvm.pairsvm._kkt_newton` preconditions MINRES by the Cholesky factor of the k × k Gram
# of the active constraints' derivatives up to this k (128 MB), and runs unpreconditioned above
KKT_PREC_MAX = 4000


def fro_method(m: float, d: int, d2: int, q: int) -> str:
    """The Frobenius method `attsvm.pairsvm.pick_solver` takes for m constraints, W (d, d2) and
    q queries, with p = min(d, m)·min(d2, q) the dimension of W's reachable space: the exact
    "ldp" where p ≤ LDP_MAX_DIM and its (m, p) rows fit (small d, where Newton stalls on a
    rank-deficient Gram); "wsnewton" where m > 2p (the dual Gram is then rank deficient:
    sequence problems); else "newton"."""
    p = min(d, m) * min(d2, q)
    if p <= LDP_MAX_DIM and m * p <= LDP_MAX_ENTRIES:
        return "ldp"
    return "wsnewton" if m > 2 * p else "newton"


def svm_route(*, n: int, T: int, d: int, norm: str = "fro", queries: str = "single") -> str:
    """The solver `solve_att_svm(..., solver="auto")` takes: "CLARABEL" or "pairs"."""
    if norm in CLARABEL_MAX_WORK and (
        clarabel_work(n=n, T=T, d=d, norm=norm, queries=queries) > CLARABEL_MAX_WORK[norm]
    ):
        return "pairs"
    return "CLARABEL"


def pairs_work(*, m: float, d: int, d2: int, q: int, norm: str = "fro") -> float:
    """Work units of one SVM by `attsvm.pairsvm.solve_pairs` ("auto") with m constraints,
    W (d, d2) and q distinct queries. With p = min(d, m)·min(d2, q) (W's reachable space)
    and x = m·d + q·d·d2 (one product with the dual Gram):

        Frobenius, the exact LDP (p ≤ 512):   5·10⁶ + 3·m·p²
                   projected Newton:          5·10⁶ + 400·x
                   working-set Newton (m > 2p):  5·10⁶ + 2000·x·max(1, m/(4p))
        nuclear, the ALM from the Frobenius solution and its Newton refinement, plus the
                   Frobenius price, plus Clarabel's price where it falls back
                   (`nuc_fallback`):
                   2·10⁸ + 5000·x + 0.025·min(m, 16 000)³
                   (the cube is fitted, not derived: with more constraints the ALM's
                   L-BFGS takes more steps per x; at n = T = 64 it is most of the time)

    Fitted to seed-0 random problems here (docs/svm-solvers.md, "Prices"), erring high."""
    p = min(d, m) * min(d2, q)
    x = m * d + q * d * d2
    if norm == "nuc":
        cost = 2e8 + 5000 * x + 0.025 * min(m, 16_000) ** 3 + pairs_work(m=m, d=d, d2=d2, q=q)
        if nuc_fallback(m=m, d=d, d2=d2, q=q):
            cost += clarabel_pairs_work(m=m, d=d, d2=d2, q=q, norm="nuc")
        return cost
    method = fro_method(m, d, d2, q)
    if method == "ldp":
        return 5e6 + 3 * m * p * p
    if method == "wsnewton":
        return 5e6 + 2000 * x * max(1.0, m / (4 * p))
    return 5e6 + 400 * x


def nuc_fallback(*, m: float, d: int, d2: int, q: int) -> bool:
    """Whether `attsvm.pairsvm` redoes a nuclear SVM by Clarabel where the ALM's certified gap
    stays above its bound: only where Clarabel's price is at most NUC_FALLBACK_WORK (above it
    the ALM's answer stands, marked "optimal_inaccurate" with its gap)."""
    return clarabel_pairs_work(m=m, d=d, d2=d2, q=q, norm="nuc") <= NUC_FALLBACK_WORK


def svm_work(
    *,
    n: int,
    T: int,
    d: int,
    norm: str = "fro",
    queries: str = "single",
    solves: int = 1,
    solver: str = "auto",
) -> float:
    """Work units of `solves` solves by `solve_att_svm(..., solver=solver)`: Clarabel's price
    (`clarabel_work`; also for "SCS") or the certified solvers' (`pairs_work`), as "auto"
    routes them (`svm_route`)."""
    if solver == "auto":
        solver = svm_route(n=n, T=T, d=d, norm=norm, queries=queries)
    if solver == "pairs" and norm in CLARABEL_MAX_WORK:
        m = _constraints(n, T, queries)
        return float(solves) * pairs_work(m=m, d=d, d2=d, q=_queries(n, T, queries), norm=norm)
    return clarabel_work(n=n, T=T, d=d, norm=norm, queries=queries, solves=solves)


def bulk_svm_work(
    *, n: int, T: int, d: int, norm: str = "fro", queries: str = "single", solves: int = 1
) -> float:
    """Work units of `solves` solves by the sweeps' exact solvers (attsvm.fastsvm).

    Each solve 5·10⁵ units (0.5 ms) plus its cost. Frobenius, a least-distance program by
    NNLS on a (d² + 1) × r system: 2·r²·d², fitted to single-thread times: (32, 32, 64)
    4.2 s, (32, 32, 32) 0.56 s, (16, 16, 32) 0.07 s; the small solves ((15, 5, 20) 1.07 ms,
    (5, 5, 20) 0.24 ms, (5, 5, 4) 0.12 ms, (5, 5, 1) infeasible 0.03 ms) are priced at 3.2×,
    3.4×, 4.5× and 16× their time. Nuclear, the batched barrier method: 1.5 × the Clarabel
    formula; single-thread times per solve (batches of 4–100 feasible problems, the LDP
    included; docs/performance.md): (32, 16, 32) 13.2 s, (16, 16, 32) 1.0 s, (8, 8, 64)
    52 ms, (10, 10, 20) 13 ms, (15, 5, 20) 8.7 ms, (5, 5, 20) 2.0–2.3 ms, priced at 3.2×,
    4.0×, 53×, 17×, 21× and 17–19× those. The margin at the largest sizes covers slower
    machines of this kind (a Zen 3 without AVX-512 ran the engine 1.67× slower)."""
    r = _constraints(n, T, queries)
    if norm == "fro":
        cost = 2 * r * r * d * d
    else:
        cost = 1.5 * (clarabel_work(n=n, T=T, d=d, norm="nuc", queries=queries) - 5e6)
    return float(solves) * (5e5 + cost)


def graph_svm_work(*, n: int, T: int, d: int, solves: int = 1) -> float:
    """Work units of `solves` Graph-SVMs of next-token data (attsvm.ntp.solve_graph_svm, cvxpy +
    Clarabel): min ‖W‖_F over d² unknowns with at most r = n·(T − 1) margin rows (one per
    label → other-token edge), dense rows, so about 30·r²·d² (docs/followups.md §3.2).
    Measured here on a busy machine (load 3–8 on 2 cores): (n, T, d) = (32, 8, 32) 2.2 s for
    191 rows; (32, 16, 64) 36 s, 468 rows; (32, 32, 64) 211 s, 988 rows; (32, 32, 32) 15 s,
    969 rows; (16, 16, 48) 2.1 s, 234 rows: 15–50 ns per r²·d². The Att-SVM formula
    (`clarabel_work`) priced the last ones 10–15× too low."""
    r = n * max(T - 1, 0)
    return float(solves) * (5e6 + 30.0 * r * r * d * d)


def sphere_work(*, n: int, T: int, d: int, param: str = "W", minimizations: int = 1) -> float:
    """Work units of `minimizations` L-BFGS minimizations of the loss over a sphere (the
    regularization path, arXiv 2308.16898 §3): about 50 + 0.12·n·T evaluations each, an
    evaluation 3·10⁵ + 8·n·T·d² (+ 4·d³ for K Qᵀ). Measured here on a busy machine (about 3×
    slower than quiet): default (6, 8, 10) 49 evaluations per minimization at 1.14 ms;
    (16, 16, 16) 85 at 2.6 ms; (32, 32, 16) 158 at 6.7 ms. The constants are scaled to the
    quiet default run (2.7 s for 144 minimizations, docs/performance.md)."""
    evals = 50 + 0.12 * n * T
    per = 3e5 + 8 * n * T * d * d + (4 * d**3 if param == "KQ" else 0)
    return float(minimizations) * evals * per


def record_floats(
    *,
    n: int,
    T: int,
    d: int,
    steps: int,
    record_every: int = 1,
    runs: int = 1,
    queries: str = "single",
) -> int:
    """float64 numbers GD records: runs · (steps/r + 1) · (d² + n·K·T + 2)."""
    k = steps // max(record_every, 1) + 1
    return runs * k * (d * d + n * _K(T, queries) * T + 2)


def stack_work(
    *, n: int, T: int, d: int, layers: int, heads: int, steps: int, runs: int = 1
) -> float:
    """Work units of GD on a stack of attention layers (`attsvm.stack`): per step and head,
    every query row's logits, values and centred average, n·T·(T·d + d²), three times
    (forward and backward), and the head's update 4·d²."""
    per = layers * heads * (3 * n * T * (T * d + d * d) + 4 * d * d)
    return float(runs) * steps * per


def stack_record_floats(
    *,
    n: int,
    T: int,
    d: int,
    layers: int,
    heads: int,
    steps: int,
    record_every: int = 1,
    runs: int = 1,
) -> int:
    """float64 numbers a stack's GD records: runs · (steps/r + 1) · (L·H·(d² + n·T²) + 2)."""
    k = steps // max(record_every, 1) + 1
    return runs * k * (layers * heads * (d * d + n * T * T) + 2)


def check_stack(
    *,
    n: int,
    T: int,
    d: int,
    layers: int,
    heads: int,
    steps: int,
    runs: int = 1,
    record_every: int | None = None,
    limits: Limits | None = None,
) -> float:
    """Refuse GD on a stack over budget; return its work (BudgetError naming the cap, or
    the largest steps and n that fit, or the recorded-history cap)."""
    L = limits or current()
    check_size(n=n, T=T, d=d, steps=steps, runs=runs, limits=L)
    w = _priced(
        L,
        stack_work,
        dict(n=n, T=T, d=d, layers=layers, heads=heads, steps=steps, runs=runs),
        f"GD on {layers} layers × {heads} heads with steps={steps:,}, n={n}, T={T}, d={d}",
        steps="steps={:,}",
        n="n={}",
    )
    if record_every is not None:
        f = stack_record_floats(
            n=n,
            T=T,
            d=d,
            layers=layers,
            heads=heads,
            steps=steps,
            record_every=record_every,
            runs=runs,
        )
        if f > L.max_record_floats:
            raise BudgetError(
                f"the recorded history would hold {f:,} numbers, more than the "
                f"{L.max_record_floats:,} allowed in {L.mode} mode; record "
                f"less often or ask for fewer steps"
            )
    return w


def seconds(work: float) -> float:
    """Rough wall-clock seconds of `work` units on the reference machine."""
    return work * NS


# -- checks ---------------------------------------------------------------------------------
def _largest(fits, lo: int, hi: int) -> int:
    """The largest x in [lo, hi] with fits(x) (fits monotone decreasing), or lo - 1."""
    if not fits(lo):
        return lo - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid - 1)
    return lo


def check_size(*, n: int, T: int, d: int, limits: Limits | None = None, **more) -> None:
    """Raise BudgetError if n, T, d (or any `more` setting named in the caps, e.g. steps,
    runs) is above the active mode's hard cap."""
    L = limits or current()
    caps = dict(
        n=L.max_n, T=L.max_T, d=L.max_d, steps=L.max_steps, runs=L.max_runs, solves=L.max_svm_solves
    )
    for name, value in dict(n=n, T=T, d=d, **more).items():
        if value is not None and name in caps and value > caps[name]:
            raise BudgetError(
                f"`{name}` must be at most {caps[name]:,} in {L.mode} mode; got {value:,}"
            )


def _priced(L: Limits, price, settings: dict, what: str, **hints) -> float:
    """price(**settings) in work units; over `L.max_work`, a BudgetError naming, for each
    setting in `hints` (name="its hint, e.g. n={}"), the largest value that fits with the
    others kept (none where even 1 does not fit)."""
    w = price(**settings)
    if w > L.max_work:
        fits = {
            name: _largest(
                lambda x, name=name: price(**{**settings, name: x}) <= L.max_work, 1, settings[name]
            )
            for name in hints
        }
        raise _over(
            L,
            what,
            w,
            [hint.format(fits[name]) if fits[name] >= 1 else "" for name, hint in hints.items()],
        )
    return w


def _over(L: Limits, what: str, work: float, hints: list[str]) -> BudgetError:
    hint = " or ".join(h for h in hints if h)
    return BudgetError(
        f"{what} would cost {work:.3g} work units (≈ {seconds(work):.3g} s), more than the "
        f"{L.max_work:.3g} allowed per action in {L.mode} mode"
        + (f". Changing one setting, the largest that fits is {hint}" if hint else "")
    )


def check_gd(
    *,
    n: int,
    T: int,
    d: int,
    steps: int,
    runs: int = 1,
    queries: str = "single",
    param: str = "W",
    m: int | None = None,
    record_every: int | None = None,
    svms=(),
    limits: Limits | None = None,
) -> float:
    """Refuse a GD action over budget; return its work. With `svms`, the action also solves
    one SVM per norm there (what the pages show beside GD), priced with it.

    Raises BudgetError naming the cap, or (work over `max_work`) the largest steps, runs and
    n (and, with `svms`, d) that fit at the other settings, the SVMs included, so that a
    suggestion is not refused again once they are added; with `record_every`, also the
    recorded-history cap.
    """
    L = limits or current()
    check_size(n=n, T=T, d=d, steps=steps, runs=runs, limits=L)

    def price(**s):
        svm = sum(svm_work(n=s["n"], T=s["T"], d=s["d"], norm=nm, queries=queries) for nm in svms)
        return gd_work(**s) + svm

    what = f"GD with runs={runs:,}, steps={steps:,}, n={n}, T={T}, d={d}"
    hints = dict(steps="steps={:,}", runs="runs={:,}", n="n={}") | (dict(d="d={}") if svms else {})
    w = _priced(
        L,
        price,
        dict(n=n, T=T, d=d, steps=steps, runs=runs, queries=queries, param=param, m=m),
        what + (" and its SVM solutions" if svms else ""),
        **hints,
    )
    if record_every is not None:
        f = record_floats(
            n=n, T=T, d=d, steps=steps, record_every=record_every, runs=runs, queries=queries
        )
        if f > L.max_record_floats:
            per = f // (steps // max(record_every, 1) + 1)
            k = max(1, L.max_record_floats // per - 1)
            raise BudgetError(
                f"`record_every` must keep the recorded history under "
                f"{L.max_record_floats:,} numbers in {L.mode} mode; got {record_every} "
                f"({f:,} numbers). Record every {math.ceil(steps / k):,} steps or more, or ask for "
                f"fewer steps or runs."
            )
    return w


def check_svm(
    *,
    solves: int = 1,
    n: int | None = None,
    T: int | None = None,
    d: int | None = None,
    norm: str = "fro",
    queries: str = "single",
    solver: str = "auto",
    limits: Limits | None = None,
) -> float:
    """Refuse SVM work over budget; return its work (0 when the sizes are not given).

    Always checks `solves` against `max_svm_solves`; with n, T, d also prices the solves
    (by `solver`, as `svm_work`) and, when over `max_work`, names the largest d, n and
    solves that fit.
    """
    L = limits or current()
    check_size(n=n, T=T, d=d, solves=solves, limits=L)
    if n is None or T is None or d is None:
        return 0.0
    name = "Att-SVM (Frobenius)" if norm == "fro" else "Att-SVM* (nuclear norm)"
    return _priced(
        L,
        svm_work,
        dict(n=n, T=T, d=d, norm=norm, queries=queries, solves=solves, solver=solver),
        f"{solves:,} × {name} at n={n}, T={T}, d={d}",
        d="d={}",
        n="n={}",
        solves="{:,} solves",
    )


def check_work(work: float, *, what: str = "this action", limits: Limits | None = None) -> float:
    """Refuse a total (e.g. a sweep's summed gd_work + svm_work) over `max_work`."""
    L = limits or current()
    if work > L.max_work:
        raise _over(L, what, work, [])
    return work


# -- typed text (attsvm.text) ------------------------------------------------------------------
# Characters and words of the sentences one action may send, per mode: checked on the raw text
# before it is tokenized or looked up. Hosted: 1,024 words in all (32 sentences of 32 words).
TEXT_CAPS = {"local": dict(chars=200_000, words=20_000), "hosted": dict(chars=6_000, words=1_024)}


def check_text(*, chars: int, words: int, limits: Limits | None = None) -> None:
    """Raise BudgetError if typed text has more characters or words than the mode allows."""
    L = limits or current()
    caps = TEXT_CAPS.get(L.mode, TEXT_CAPS["local"])
    if chars > caps["chars"]:
        raise BudgetError(
            f"`sentences` must have at most {caps['chars']:,} characters in "
            f"{L.mode} mode; got {chars:,}"
        )
    if words > caps["words"]:
        raise BudgetError(
            f"`sentences` must have at most {caps['words']:,} words in {L.mode} mode; got {words:,}"
        )
