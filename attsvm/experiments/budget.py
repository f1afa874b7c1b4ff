"""What an experiment's settings will cost, priced as a whole before it starts.

Every piece of work an experiment does is priced with `attsvm.limits`' formulas (work units
≈ ns on the reference 2-core machine): its gradient-descent runs (`gd_work`), its SVM solves
by cvxpy + Clarabel (`svm_work`) or by the sweeps' exact solvers (`bulk_svm_work`), the
regularization path's sphere minimizations (`sphere_work`), and the float64 numbers a
gradient-descent call records at once (`record_floats`). `check` refuses settings over the
active mode's caps and names, for each setting that can be lowered, the largest value that
fits with the others unchanged.

    budget.check("local-convergence", experiments.settings("local-convergence", runs=500))
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from types import SimpleNamespace

from .. import limits
from ..problems import paper_problem

NORM_OF = {"W": "fro", "KQ": "nuc"}


@dataclass(frozen=True)
class Price:
    """The cost of one experiment run.

    Attributes:
        items: (what, work units) for each piece of work.
        floats: the most float64 numbers one gradient-descent call records at once.
        sizes: the largest n, T, d, steps, runs and solves asked for (the modes' hard caps).
    """

    items: tuple
    floats: int
    sizes: dict

    @property
    def work(self) -> float:
        return float(sum(w for _, w in self.items))

    @property
    def seconds(self) -> float:
        return limits.seconds(self.work)


def _gd(what, *, n, T, d, steps, runs, param="W", queries="single", record_every=None,
        span=True):
    """(what, work) of GD runs (NGD in `attsvm.engine`: priced in its span form where it
    takes it; span=False for another engine) and the floats one call records."""
    item = (what, limits.gd_work(n=n, T=T, d=d, steps=steps, runs=runs, param=param,
                                 queries=queries, record_every=record_every if span else None))
    floats = 0
    if record_every is not None:
        floats = limits.record_floats(n=n, T=T, d=d, steps=steps, record_every=record_every,
                                      runs=runs, queries=queries)
    return item, floats


def _geometry(s):
    p = paper_problem(s.preset)
    items = [_gd(f"GD on {param}", n=p.n, T=p.T, d=p.d, steps=s.steps, runs=1, param=param,
                 record_every=1) for param in ("W", "KQ")]
    svm = [(f"Att-SVM ({nm})", limits.svm_work(n=p.n, T=p.T, d=p.d, norm=nm))
           for nm in ("fro", "nuc")]
    return ([i for i, _ in items] + svm, max(f for _, f in items),
            dict(n=p.n, T=p.T, d=p.d, steps=s.steps, runs=1))


def _local_convergence(s):
    gd = [_gd(f"GD on {param}", n=s.n, T=s.T, d=s.d, steps=s.steps, runs=s.runs, param=param,
              record_every=s.record_every) for param in s.params]
    keys = s.runs * len(s.params)      # distinct (run, selection) pairs, at most
    svm = [(f"{keys} × Att-SVM ({nm}), bulk",
            limits.bulk_svm_work(n=s.n, T=s.T, d=s.d, norm=nm, solves=keys))
           for nm in ("fro", "nuc")]
    return ([i for i, _ in gd] + svm, max(f for _, f in gd),
            dict(n=s.n, T=s.T, d=s.d, steps=s.steps, runs=s.runs, solves=2 * keys))


def _multi_token(s):
    from .core import chunk_size
    items, floats = [], 0
    cands = min(s.max_seeds, 64 * s.runs)   # acceptance falls to ~1.6 % at d = 10
    for d in s.ds:
        (what, w), _ = _gd(f"d={d}: GD on {cands:,} candidates", n=s.n, T=s.T, d=d,
                           steps=s.steps, runs=cands, record_every=s.record_every)
        items.append((what, w))
        items.append((f"d={d}: {s.runs} generalized SVMs",
                      limits.bulk_svm_work(n=s.n, T=s.T, d=d, solves=s.runs)))
        chunk = min(cands, chunk_size(10**9))   # the sweep records one chunk at a time
        floats = max(floats, limits.record_floats(n=s.n, T=s.T, d=d, steps=s.steps,
                                                  record_every=s.record_every, runs=chunk))
    return items, floats, dict(n=s.n, T=s.T, d=max(s.ds), steps=s.steps, runs=s.runs)


def _svm_rank(s):
    items, solves = [], 0
    for n, T in s.pairs:
        for d in s.ds:
            if s.style == "accurate":     # draws until `runs` feasible: max_draws at worst
                fro = limits.bulk_svm_work(n=n, T=T, d=d, solves=s.max_draws)
                nuc = limits.bulk_svm_work(n=n, T=T, d=d, norm="nuc", solves=s.runs)
            else:
                fro = limits.bulk_svm_work(n=n, T=T, d=d, solves=s.runs)
                nuc = limits.svm_work(n=n, T=T, d=d, norm="nuc", solves=s.runs)
            solves += 2 * s.runs     # the count cap: the solves kept (extra draws: in work)
            items.append((f"n={n}, T={T}, d={d}: SVMs", fro + nuc))
    n = max(p[0] for p in s.pairs)
    T = max(p[1] for p in s.pairs)
    return items, 0, dict(n=n, T=T, d=max(s.ds), runs=s.runs, solves=solves)


def _overparameterization(s):
    items, floats = [], 0
    for d in s.ds:
        (what, w), f = _gd(f"d={d}: GD", n=s.n, T=s.T, d=d, steps=s.steps, runs=s.runs,
                           param=s.param, record_every=s.steps)
        items.append((what, w))
        floats = max(floats, f)
        items.append((f"d={d}: SVMs at α and at opt",
                      limits.bulk_svm_work(n=s.n, T=s.T, d=d, norm=NORM_OF[s.param],
                                           solves=s.runs)
                      + limits.bulk_svm_work(n=s.n, T=s.T, d=d, solves=s.runs)))
    return items, floats, dict(n=s.n, T=s.T, d=max(s.ds), steps=s.steps, runs=s.runs,
                               solves=2 * s.runs * len(s.ds))


def _regularization_path(s):
    items = [(f"Att-SVM ({nm})", limits.svm_work(n=s.n, T=s.T, d=s.d, norm=nm))
             for nm in ("fro", "nuc")]
    mins = s.radii * (s.restarts + 1)
    for param in s.params:
        items.append((f"{param}: {mins} minimizations over spheres",
                      limits.sphere_work(n=s.n, T=s.T, d=s.d, param=param,
                                         minimizations=mins)))
    return items, 0, dict(n=s.n, T=s.T, d=s.d, solves=2)


def _sequence_causal(s):
    items, floats = [], 0
    for mode in s.modes:
        (what, w), f = _gd(f"{mode}: GD", n=s.n, T=s.T, d=s.d, steps=s.steps, runs=s.runs,
                           param=s.param, queries=mode, record_every=s.record_every)
        items.append((what, w))
        floats = max(floats, f)
        items.append((f"{mode}: {s.runs} per-query SVMs",
                      limits.bulk_svm_work(n=s.n, T=s.T, d=s.d, norm=NORM_OF[s.param],
                                           queries=mode, solves=s.runs)))
    return items, floats, dict(n=s.n, T=s.T, d=s.d, steps=s.steps, runs=s.runs,
                               solves=s.runs * len(s.modes))


def _ntp(s):
    """Next-token prediction (arXiv 2403.08081): NGD on W and on the reduced data for W^fin
    (twice more for the local variant), and one or two Graph-SVMs per instance."""
    from .ntp import LocalSettings
    runs = s.instances * (4 if isinstance(s, LocalSettings) else 2)
    item, floats = _gd(f"NGD on W and W^fin ({s.instances} instances)", n=s.n, T=s.T, d=s.d,
                       steps=s.steps, runs=runs, record_every=s.record_every,
                       span=False)                           # attsvm.ntp.gd's own engine
    svm = (f"{2 * s.instances} Graph-SVMs", limits.graph_svm_work(n=s.n, T=s.T, d=s.d,
                                                                  solves=s.instances * 2))
    return [item, svm], floats, dict(n=s.n, T=s.T, d=s.d, steps=s.steps, runs=runs,
                                     solves=2 * s.instances)


def _lp_mirror_descent(s):
    """ℓp mirror descent (arXiv 2410.14581): every (run, p) a GD-priced run; the ℓp-AttSVMs
    are power-cone programs, priced with the conic formula."""
    B = s.runs * len(s.ps)
    gd = limits.gd_work(n=s.n, T=s.T, d=s.d, steps=s.steps, runs=B)
    solves = B * len(s.ps)          # at most: runs sharing a selection share its SVMs
    items = [(f"{B} mirror-descent runs", gd),
             (f"{solves} ℓp-AttSVMs (cvxpy)",
              limits.svm_work(n=s.n, T=s.T, d=s.d, norm="lp", solves=solves))]
    S = s.runs * len(s.steepest)    # steepest descent: fro, ℓ∞ and spectral SVM per run
    if S:
        items += [(f"{S} steepest-descent runs",
                   limits.gd_work(n=s.n, T=s.T, d=s.d, steps=s.steps, runs=S)),
                  (f"{3 * S} fro/ℓ∞/spectral Att-SVMs (cvxpy)",
                   limits.svm_work(n=s.n, T=s.T, d=s.d, norm="fro", solves=S)
                   + limits.svm_work(n=s.n, T=s.T, d=s.d, norm="max", solves=2 * S))]
    floats = limits.record_floats(n=s.n, T=s.T, d=s.d, steps=s.steps,
                                  record_every=s.record_every, runs=B)
    return items, floats, dict(n=s.n, T=s.T, d=s.d, steps=s.steps, runs=B + S,
                               solves=solves + 3 * S)


def _adaptive_steps(s):
    """GD vs NGD vs Polyak (arXiv 2402.05738) on the same instances, and their SVMs."""
    items = [(f"{s.runs} {rule} runs", limits.gd_work(n=s.n, T=s.T, d=s.d, steps=s.steps,
                                                     runs=s.runs))
             for rule in ("GD", "NGD", "Polyak")]
    solves = 4 * s.runs            # feasibility at opt, then one per (rule, instance)
    items.append((f"{solves} Att-SVMs (Frobenius), bulk",
                  limits.bulk_svm_work(n=s.n, T=s.T, d=s.d, solves=solves)))
    floats = limits.record_floats(n=s.n, T=s.T, d=s.d, steps=s.steps,
                                  record_every=s.record_every, runs=s.runs)
    return items, floats, dict(n=s.n, T=s.T, d=s.d, steps=s.steps, runs=s.runs, solves=solves)


def _joint_training(s):
    """Joint (v, W) training (arXiv 2306.13596, 2410.14581): the presets, the random runs
    and per run a head SVM, two Att-SVMs and the balanced SVM (bisection to 1e-4: at most 15
    QPs): measured ≈ 24–28 Att-SVM solves' time per run, priced as 30."""
    presets = 2 * limits.gd_work(n=3, T=2, d=2, steps=1000, runs=1) + len(s.toy_ps) * \
        limits.gd_work(n=2, T=3, d=2, steps=2000, runs=1)
    items = [("presets (MMTS, MD-Att toy)", presets),
             (f"{s.runs} joint NGD runs", limits.gd_work(n=s.n, T=s.T, d=s.d, steps=s.steps,
                                                         runs=s.runs)),
             (f"{30 * s.runs} SVMs (cvxpy)",
              limits.svm_work(n=s.n, T=s.T, d=s.d, norm="fro", solves=30 * s.runs))]
    floats = limits.record_floats(n=s.n, T=s.T, d=s.d, steps=s.steps, record_every=s.steps,
                                  runs=s.runs)
    return items, floats, dict(n=s.n, T=s.T, d=s.d, steps=s.steps, runs=s.runs,
                               solves=30 * s.runs)


def _rank_staircase(s):
    """(K, Q)-GD from each init scale α (arXiv 2306.07042), then the selections' nuclear
    Att-SVMs (classification and rank), bulk."""
    B = s.runs * len(s.alphas)
    solves = 3 * B              # classify_runs (at α and at opt) and the rank's nuclear SVM
    items = [(f"{B} (K, Q) runs", limits.gd_work(n=s.n, T=s.T, d=s.d, steps=s.steps, runs=B,
                                                 param="KQ")),
             (f"{solves} Att-SVMs (nuclear), bulk",
              limits.bulk_svm_work(n=s.n, T=s.T, d=s.d, solves=solves, norm="nuc"))]
    floats = limits.record_floats(n=s.n, T=s.T, d=s.d, steps=s.steps,
                                  record_every=s.record_every, runs=s.runs)
    return items, floats, dict(n=s.n, T=s.T, d=s.d, steps=s.steps, runs=B, solves=solves)


def _weight_decay(s):
    """(K, Q)-GD with weight decay λ (arXiv 2410.23819) in `segments` pieces, then the
    selections' nuclear Att-SVMs."""
    B = s.runs * len(s.lambdas)
    solves = 3 * B
    items = [(f"{B} (K, Q) runs", limits.gd_work(n=s.n, T=s.T, d=s.d, steps=s.steps, runs=B,
                                                 param="KQ")),
             (f"{solves} Att-SVMs (nuclear), bulk",
              limits.bulk_svm_work(n=s.n, T=s.T, d=s.d, solves=solves, norm="nuc")),
             (f"{s.segments * len(s.lambdas)} GD calls (≈ 5 ms each)",
              5e6 * s.segments * len(s.lambdas))]
    floats = limits.record_floats(n=s.n, T=s.T, d=s.d, steps=s.steps // s.segments,
                                  record_every=s.steps // s.segments, runs=s.runs)
    return items, floats, dict(n=s.n, T=s.T, d=s.d, steps=s.steps, runs=B, solves=solves)


def _real_words(s):
    from .real_words import task_sizes
    items, floats, big = [], 0, (1, 1)
    norm = NORM_OF[s.param]
    for name, (n, T) in task_sizes(s).items():
        big = max(big, (n, T))
        (what, w), f = _gd(f"{name}: GD", n=n, T=T, d=50, steps=s.steps, runs=1,
                           param=s.param, record_every=s.record_every)
        items.append((what, w))
        floats = max(floats, f)
        items.append((f"{name}: 2 Att-SVMs", limits.svm_work(n=n, T=T, d=50, norm=norm,
                                                             solves=2)))
        for d in s.ds:
            m = min(s.subset_n, n)
            items.append((f"{name}: {s.subsets} subset SVMs at d={d}",
                          limits.bulk_svm_work(n=m, T=T, d=d, solves=s.subsets)
                          + limits.bulk_svm_work(n=n, T=T, d=d)))
    solves = len(s.tasks) * (2 + len(s.ds) * (s.subsets + 1))
    return items, floats, dict(n=big[0], T=big[1], d=50, steps=s.steps, runs=1, solves=solves)


def _svm_hierarchy(s):
    """Per (H, values) setting: one batched stack run (`limits.stack_work`), then every
    head's Att-SVM (earlier layers: every token a query; the last layer: one query)."""
    items, solves, floats = [], 0, 0
    for H in s.heads:
        B = s.runs * len(s.values)
        items.append((f"{B} stack runs, {s.layers} layers × {H} heads",
                      limits.stack_work(n=s.n, T=s.T, d=s.d, layers=s.layers, heads=H,
                                        steps=s.steps, runs=B)))
        early = B * H * (s.layers - 1)
        if early:
            items.append((f"{early} Att-SVMs at every token",
                          limits.svm_work(n=s.n, T=s.T, d=s.d, queries="sequence",
                                          solves=early)))
        items.append((f"{B * H} Att-SVMs at the query",
                      limits.svm_work(n=s.n, T=s.T, d=s.d, solves=B * H)))
        solves += B * H * s.layers
        floats = max(floats, limits.stack_record_floats(
            n=s.n, T=s.T, d=s.d, layers=s.layers, heads=H, steps=s.steps,
            record_every=s.steps, runs=s.runs))
    return items, floats, dict(n=s.n, T=s.T, d=s.d, steps=s.steps, runs=s.runs,
                               solves=solves)


PRICES = {
    "geometry-1": _geometry,
    "geometry-2": _geometry,
    "local-convergence": _local_convergence,
    "multi-token": _multi_token,
    "svm-rank": _svm_rank,
    "overparameterization": _overparameterization,
    "regularization-path": _regularization_path,
    "sequence-causal": _sequence_causal,
    "ntp-global": _ntp,
    "ntp-local": _ntp,
    "lp-mirror-descent": _lp_mirror_descent,
    "adaptive-steps": _adaptive_steps,
    "joint-training": _joint_training,
    "rank-staircase": _rank_staircase,
    "weight-decay": _weight_decay,
    "real-words": _real_words,
    "svm-hierarchy": _svm_hierarchy,
}
# Settings a visitor can lower to make a run cheaper (ints, and grids of ints).
LOWERABLE = ("runs", "steps", "n", "T", "d", "ds", "max_draws", "max_seeds", "radii",
             "restarts", "instances")


def price(name: str, s) -> Price:
    """The cost of running experiment `name` with settings `s` (no validation: any object
    with the settings' attributes)."""
    if name not in PRICES:
        raise ValueError(f"`name` must be one of {sorted(PRICES)}; got {name!r}")
    items, floats, sizes = PRICES[name](s)
    return Price(items=tuple(items), floats=int(floats), sizes=sizes)


def _fits(name, s, L) -> bool:
    p = price(name, s)
    caps = dict(n=L.max_n, T=L.max_T, d=L.max_d, steps=L.max_steps, runs=L.max_runs,
                solves=L.max_svm_solves)
    return (p.work <= L.max_work and p.floats <= L.max_record_floats
            and all(v <= caps[k] for k, v in p.sizes.items() if k in caps))


def _largest(name, s, field, L):
    """The largest value of `field` (an int, or the top of a grid of ints) that fits with the
    other settings unchanged, or None."""
    value = getattr(s, field)
    grid = isinstance(value, tuple)
    top = max(value) if grid else value
    if not isinstance(top, int) or isinstance(top, bool) or top < 1:
        return None

    def at(x):
        v = tuple(g for g in value if g <= x) if grid else x
        return SimpleNamespace(**{**_fields(s), field: v}) if v != () else None

    lo, hi = (0 if field == "restarts" else 1), top - 1
    if hi < lo or at(lo) is None or not _fits(name, at(lo), L):
        return None
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if _fits(name, at(mid), L) else (lo, mid - 1)
    try:        # a hint must be a value the experiment accepts (e.g. T ≥ 2)
        dataclasses.replace(s, **{field: getattr(at(lo), field)})
    except ValueError:
        return None
    return lo


def _fields(s) -> dict:
    return {f.name: getattr(s, f.name) for f in dataclasses.fields(s)}


def check(name: str, s, *, limits_: limits.Limits | None = None) -> Price:
    """Refuse settings over the active mode's caps; return their price.

    Raises:
        BudgetError naming the cap that is passed and, for each setting that can be lowered
        alone to fit (runs, steps, n, T, d, the grid ds, …), the largest value that fits.
    """
    L = limits_ or limits.current()
    p = price(name, s)
    if _fits(name, s, L):
        return p
    caps = dict(n=L.max_n, T=L.max_T, d=L.max_d, steps=L.max_steps, runs=L.max_runs,
                solves=L.max_svm_solves)
    over = [f"{k} = {v:,} (at most {caps[k]:,})" for k, v in p.sizes.items()
            if k in caps and v > caps[k]]
    if p.work > L.max_work:
        over.append(f"≈ {p.seconds:.3g} s of compute (at most {limits.seconds(L.max_work):.3g} s)")
    if p.floats > L.max_record_floats:
        over.append(f"{p.floats:,} recorded numbers (at most {L.max_record_floats:,})")
    hints = []
    for field in LOWERABLE:
        if hasattr(s, field):
            best = _largest(name, s, field, L)
            if best is not None:
                hints.append(f"`{field}` ≤ {best:,}" if field != "ds"
                             else f"`ds` up to {best:,}")
    if not hints:
        default = type(s)(**({"preset": s.preset} if hasattr(s, "preset") else {}))
        hints_text = ". No single setting fits when lowered alone: ask for less of several"
        if _fits(name, default, L):
            hints_text += f" (the paper's settings fit, at ≈ {price(name, default).seconds:.2g} s)"
    else:
        hints_text = f". Lower one setting: {', or '.join(hints)}"
    raise limits.BudgetError(
        f"{name} with these settings asks for {'; '.join(over)} per action in {L.mode} mode"
        + hints_text)
