"""The studies the app's pages show, as plain functions of settings records.

Settings travel as frozen records (`ProblemSpec`, `TrainSpec`, and a study's own:
`BasinsSettings`, `RankCell`, `RaceSettings`). Each study returns tidy DataFrames (or a
small dict) and is deterministic in its arguments, so the app caches it by them. The
paper's claims they probe (arXiv 2308.16898):

- `basins`: where GD from many initializations converges, which locally optimal α
  (Definition 2, Theorem 5 "local convergence");
- `classify_runs`, `overparam_cell` / `overparam_fractions`: how often GD reaches α = opt
  as d grows (§4.1, over-parameterization); the experiment "overparameterization" classifies
  its runs with the same `classify_runs`;
- `rank_rows`, `rank_cell` / `rank_summary`: ranks of W^mm and W^mm_* (§3, Theorem 3); the
  experiment "svm-rank" (accurate style) draws its instances with the same `rank_rows`;
- `generalized_fit`: GD on a nonlinear head against the generalized SVM (§6, eq. (10)).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from . import fastsvm
from .config import ProblemSpec, TrainSpec, record_every
from .limits import MAX_D, MAX_N, MAX_T
from .metrics import RANK_RTOL, correlation, numerical_rank
from .optimizers import MAX_P, MIN_P, OPTIMIZERS
from .problems import (
    ATTENTIONS,
    Problem,
    check_choice,
    check_float,
    check_int,
    optimal_tokens,
    random_problem,
    token_scores,
)
from .svm import (
    locally_optimal_selections,
    solve_att_svm,
    solve_generalized_svm,
    supports_score_lower,
)
from .training import MAX_STEPS, train, train_batch


def run(pspec: ProblemSpec, tspec: TrainSpec, every: int | None = None):
    """One GD run of the records, recorded every `every` steps (default: ~200 records)."""
    prob = pspec.build()
    r = every or record_every(tspec.steps)
    return train(
        prob,
        steps=tspec.steps,
        init=tspec.init_for(prob),
        record_every=r,
        **tspec.train_kwargs(prob),
    )


@dataclass(frozen=True, kw_only=True)
class BasinsSettings:
    """The starts of `basins` (hashable: the app's cache key): `runs` initializations of
    Frobenius norm `radius`, drawn with `inits_seed`, in random directions or (plane) on a
    √runs × √runs grid of a random plane, so then `runs` is a square."""

    runs: int = 64
    radius: float = 3.0
    plane: bool = False
    inits_seed: int = 0

    def __post_init__(self):
        runs = check_int("runs", self.runs, 1, 1_000_000)
        if not isinstance(self.plane, (bool, np.bool_)):
            raise ValueError(f"`plane` must be True or False; got {self.plane!r}")
        if self.plane and math.isqrt(runs) ** 2 != runs:
            raise ValueError(f"`runs` must be a square (a grid of starts) on a plane; got {runs}")
        fields = dict(
            runs=runs,
            radius=check_float("radius", self.radius, 0.0, 1e6),
            plane=bool(self.plane),
            inits_seed=check_int("inits_seed", self.inits_seed, 0, 2**63 - 1),
        )
        for k, v in fields.items():  # plain values: equal settings, one cache key
            object.__setattr__(self, k, v)

    @property
    def grid(self) -> int:
        """g of the plane's g × g grid of starts."""
        return math.isqrt(self.runs)


def _initializations(prob: Problem, tspec: TrainSpec, s: BasinsSettings):
    """The starts of `s` for `prob` and their plane coordinates (see `basins`)."""
    d, m = prob.d, tspec.m_for(prob)
    runs, radius = s.runs, s.radius
    rng = np.random.default_rng([s.inits_seed, 7])
    if s.plane:
        g = s.grid
        E = rng.standard_normal((2, d * d))
        E[0] /= np.linalg.norm(E[0])
        E[1] -= (E[1] @ E[0]) * E[0]
        E[1] /= np.linalg.norm(E[1])
        ticks = np.linspace(-1.0, 1.0, g)
        A, B = np.meshgrid(ticks, ticks, indexing="ij")
        coords = np.stack([A.ravel(), B.ravel()], 1)
        Ws = radius * (coords @ E).reshape(-1, d, d)
    else:
        coords = np.full((runs, 2), np.nan)
        G = rng.standard_normal((runs, d, d))
        Ws = radius * G / np.linalg.norm(G, axis=(1, 2), keepdims=True)
    if tspec.param == "W":
        return list(Ws), coords
    inits = []  # balanced factors of each W: K = U√S, Q = V√S (rank m truncation)
    for W in Ws:
        U, S, Vt = np.linalg.svd(W)
        r = np.sqrt(S[:m])
        inits.append((U[:, :m] * r, Vt[:m].T * r))
    return inits, coords


def basins(pspec: ProblemSpec, tspec: TrainSpec, s: BasinsSettings) -> pd.DataFrame:
    """GD from the starts of `s`: `s.runs` initializations of Frobenius norm `s.radius`
    (random directions, or a √runs × √runs grid on the plane spanned by two random
    orthonormal directions E₁, E₂).

    Returns one row per run: a, b (plane coordinates or NaN), selection (tuple), prob
    (smallest selected softmax weight at the end).
    """
    prob = pspec.build()
    inits, coords = _initializations(prob, tspec, s)
    run = train_batch(
        [prob] * len(inits),
        steps=tspec.steps,
        init=inits,
        record_every=tspec.steps,
        **tspec.train_kwargs(prob),
    )
    alphas = run.alpha  # (B, n)
    sel = np.take_along_axis(run.probs[:, -1], alphas[..., None], -1)[..., 0].min(1)
    return pd.DataFrame(
        {
            "a": coords[:, 0],
            "b": coords[:, 1],
            "selection": [tuple(int(x) for x in a) for a in alphas],
            "prob": sel,
        }
    )


def selections(pspec: ProblemSpec, norm: str = "fro") -> pd.DataFrame:
    """Every selection α with its status (`attsvm.locally_optimal_selections`)."""
    return pd.DataFrame(locally_optimal_selections(pspec.build(), norm=norm))


def classify_runs(probs: list[Problem], alphas, norm: str = "fro") -> list[dict]:
    """What each GD run reached (§4.1; Definition 2 for "locally optimal").

    Args:
        probs: B problems; alphas: B selections α (GD's final argmax), (n,) each.
        norm: the Att-SVM that judges α ("fro" for W-GD, "nuc" for K Qᵀ-GD).
    Returns:
        one dict per run: selection (tuple), opt (tuple, None on a tie), is_global (α = opt),
        feasible (Att-SVM_α), local (feasible and every support token scores below the
        selected one), opt_feasible (Att-SVM at opt; None on a tie) and kind (as
        `classify_selection`: "global" / "local" / "feasible" / "infeasible"). Solved in bulk
        by `fastsvm` (exact; tests hold it to the Clarabel answers).
    """
    opts = []
    for p in probs:
        try:
            opts.append(optimal_tokens(p))
        except ValueError:  # a tie: no unique optimal token
            opts.append(None)
    at_alpha = fastsvm.solve_many(probs, alphas, norm)
    has_opt = [b for b, o in enumerate(opts) if o is not None]
    # feasibility does not depend on the norm (same constraints): the Frobenius LDP decides
    at_opt = fastsvm.solve_many([probs[b] for b in has_opt], [opts[b] for b in has_opt], "fro")
    opt_feasible = dict(zip(has_opt, (bool(f) for f in at_opt["feasible"]), strict=True))
    rows = []
    for b, p in enumerate(probs):
        alpha, opt = np.asarray(alphas[b]), opts[b]
        feasible = bool(at_alpha["feasible"][b])
        local = feasible and supports_score_lower(token_scores(p), alpha, at_alpha["support"][b])
        is_global = opt is not None and bool(np.array_equal(alpha, opt))
        kind = (
            "infeasible"
            if not feasible
            else "feasible"
            if not local
            else "global"
            if is_global
            else "local"
        )
        rows.append(
            dict(
                selection=tuple(int(a) for a in alpha),
                opt=None if opt is None else tuple(int(a) for a in opt),
                is_global=is_global,
                feasible=feasible,
                local=local,
                opt_feasible=opt_feasible.get(b),
                kind=kind,
            )
        )
    return rows


def overparam_cell(base: ProblemSpec, tspec: TrainSpec, runs: int) -> pd.DataFrame:
    """Runs with data seeds base.seed … base.seed+runs−1 at dimension base.d: what GD
    reached (`classify_runs`) and whether the global SVM is feasible. One row per run."""
    specs = [base.with_(seed=base.seed + j) for j in range(runs)]
    probs = [s.build() for s in specs]
    run = train_batch(
        probs,
        steps=tspec.steps,
        init=None,
        record_every=tspec.steps,
        **tspec.train_kwargs(probs[0]),
    )
    rows = classify_runs(probs, list(run.alpha), tspec.norm)
    return pd.DataFrame(
        [
            dict(
                d=base.d,
                seed=s.seed,
                selection=r["selection"],
                opt=r["opt"],
                opt_feasible=r["opt_feasible"],
                kind=r["kind"],
            )
            for s, r in zip(specs, rows, strict=True)
        ]
    )


OVERPARAM_OUTCOMES = (
    "1 · GD reached α = opt (global)",
    "2 · GD reached a locally optimal α (incl. global)",
    "3 · Att-SVM for α = opt feasible",
)


def overparam_fractions(res: pd.DataFrame) -> pd.DataFrame:
    """Per d, the share of runs per outcome (`OVERPARAM_OUTCOMES`); tidy: d, outcome,
    fraction, runs. `res`: `overparam_cell` rows of several d."""
    rows = []
    for d, g in res.groupby("d"):
        total = len(g)
        fractions = (
            (g["kind"] == "global").mean(),
            g["kind"].isin(["global", "local"]).mean(),
            g["opt_feasible"].fillna(False).astype(bool).mean(),
        )
        rows += [
            dict(d=d, outcome=o, fraction=f, runs=total)
            for o, f in zip(OVERPARAM_OUTCOMES, fractions, strict=True)
        ]
    return pd.DataFrame(rows)


def rank_rows(
    n: int,
    T: int,
    d: int,
    seeds,
    *,
    attention: str = "cross",
    rtol: float = RANK_RTOL,
    quota: int | None = None,
) -> list[dict]:
    """Numerical ranks (σ_k > rtol·σ_1) of W^mm and W^mm_* at α = opt (§3, Theorem 3) on
    the random problems of `seeds`, solved exactly in bulk (`fastsvm`).

    α is the first argmax of the token scores: a tie leaves a zero constraint, so that
    instance counts as infeasible. The first `quota` feasible instances (all if None) are
    `used` and get the nuclear solve; the others keep rank_nuc = NaN.

    Returns one dict per seed: n, T, d, seed, feasible, used, rank_fro, rank_nuc,
    method_nuc ("barrier" or "clarabel"; "" where not solved).
    """
    seeds = list(seeds)
    probs = [random_problem(n, T, d, seed=k, attention=attention) for k in seeds]
    alphas = [token_scores(p).argmax(-1) for p in probs]
    fro = fastsvm.solve_many(probs, alphas, "fro")
    feasible = [bool(f) for f in fro["feasible"]]
    keep = [j for j, f in enumerate(feasible) if f][:quota]
    rows = [
        dict(
            n=n,
            T=T,
            d=d,
            seed=k,
            feasible=feasible[j],
            used=j in keep,
            rank_fro=numerical_rank(fro["W"][j], rtol=rtol) if feasible[j] else np.nan,
            rank_nuc=np.nan,
            method_nuc="",
        )
        for j, k in enumerate(seeds)
    ]
    if keep:
        nuc = fastsvm.solve_many([probs[j] for j in keep], [alphas[j] for j in keep], "nuc")
        for q, j in enumerate(keep):
            rows[j].update(
                rank_nuc=numerical_rank(nuc["W"][q], rtol=rtol), method_nuc=nuc["method"][q]
            )
    return rows


@dataclass(frozen=True, kw_only=True)
class RankCell:
    """One (n, T, d) cell of the rank sweep (`rank_cell`; hashable: the app's cache key):
    `instances` random problems with data seeds seed0 … seed0+instances−1."""

    n: int
    T: int
    d: int
    instances: int = 5
    seed0: int = 0
    attention: str = "cross"

    def __post_init__(self):
        instances = check_int("instances", self.instances, 1, 100_000)
        fields = dict(
            n=check_int("n", self.n, 1, MAX_N),
            T=check_int("T", self.T, 1, MAX_T),
            d=check_int("d", self.d, 1, MAX_D),
            instances=instances,
            seed0=check_int("seed0", self.seed0, 0, 2**63 - instances),
            attention=check_choice("attention", self.attention, ATTENTIONS),
        )
        for k, v in fields.items():  # plain values: equal settings, one cache key
            object.__setattr__(self, k, v)


def rank_cell(c: RankCell) -> pd.DataFrame:
    """`rank_rows` of the cell's data seeds, one row per instance."""
    seeds = range(c.seed0, c.seed0 + c.instances)
    rows = rank_rows(c.n, c.T, c.d, seeds, attention=c.attention)
    return pd.DataFrame(rows, columns=["n", "T", "d", "seed", "feasible", "rank_fro", "rank_nuc"])


def rank_summary(res: pd.DataFrame) -> pd.DataFrame:
    """Per (n, d) and norm: mean / min / max rank over feasible instances, their count and
    the feasible fraction. `res`: `rank_cell` rows."""
    rows = []
    for (n, d), g in res.groupby(["n", "d"]):
        f = g[g["feasible"]]
        for norm, col in (("W^mm (Frobenius)", "rank_fro"), ("W^mm_* (nuclear)", "rank_nuc")):
            v = f[col].dropna()
            rows.append(
                dict(
                    d=d,
                    n=f"n = {n}",
                    norm=norm,
                    count=len(v),
                    rank=v.mean() if len(v) else np.nan,
                    lo=v.min() if len(v) else np.nan,
                    hi=v.max() if len(v) else np.nan,
                    feasible=g["feasible"].mean(),
                )
            )
    return pd.DataFrame(rows)


def generalized_fit(prob: Problem, traj, *, threshold: float, norm: str) -> dict:
    """A GD run (`traj`, single run) with the generalized SVM (W^dir, W^fin, R) of its last
    iterate and the one-token Att-SVM of its final selection."""
    gen = solve_generalized_svm(prob, traj.W[-1], threshold=threshold, norm=norm)
    one = solve_att_svm(prob, traj.alpha, norm)
    return dict(run=traj, gen=gen, one=one)


def generalized_gaps(run, gen, one) -> dict:
    """1 − corr(W(k), ·) for the generalized SVM W^fin + R_k·W^dir (R_k fitted by least
    squares at every k), W^dir alone and the one-token SVM; unavailable ones are left out."""
    refs = {}
    if gen.feasible and np.any(gen.W_dir):
        R = np.einsum("kij,ij->k", run.W - gen.W_fin, gen.W_dir) / float(np.sum(gen.W_dir**2))
        pred = gen.W_fin[None] + R[:, None, None] * gen.W_dir[None]  # (k, d, d)
        num = np.einsum("kij,kij->k", run.W, pred)
        den = np.linalg.norm(run.W, axis=(1, 2)) * np.linalg.norm(pred, axis=(1, 2))
        with np.errstate(invalid="ignore", divide="ignore"):
            refs["W^fin + R_k·W^dir (generalized SVM)"] = 1 - num / den
        refs["W^dir alone"] = 1 - correlation(run.W, gen.W_dir)
    if one.feasible:
        refs["one-token SVM W^mm_α"] = 1 - correlation(run.W, one.W)
    return refs


# -- Optimizer → norm (arXiv 2410.14581, 2402.05738; docs/followups.md §5) -------------------
# optimizer: (label, the norm theory names, status, citation)
OPTIMIZER_THEORY = {
    "gd": ("GD", "fro", "proved (local)", "arXiv 2308.16898 §3"),
    "ngd": ("NGD", "fro", "proved (global tokens, data settings)", "arXiv 2402.05738"),
    "polyak": ("Polyak", "fro", "proved (global tokens, data settings)", "arXiv 2402.05738"),
    "md": ("ℓp-MD", "lp", "proved (local)", "arXiv 2410.14581"),
    "nmd": (
        "normalized ℓp-MD",
        "lp",
        "proved for MD (local); normalized: the authors' code",
        "arXiv 2410.14581",
    ),
    "sign": ("signGD", "max", "open for attention (linear models: 2502.04664, 1802.08246)", "—"),
    "spectral": ("spectral descent", "spectral", "open for attention (linear: 2502.04664)", "—"),
}


def race_norms(p: float) -> list:
    """(norm, p, label) of the five Att-SVMs an optimizer race is compared with."""
    return [
        ("fro", None, "Frobenius"),
        ("nuc", None, "nuclear"),
        ("lp", float(p), f"ℓ{p:g}"),
        ("max", None, "ℓ∞ (max)"),
        ("spectral", None, "spectral"),
    ]


@dataclass(frozen=True, kw_only=True)
class RaceSettings:
    """An optimizer race (`race`; hashable: the app's cache key): `runs` as (label,
    optimizer, lr, p) tuples, p None unless md/nmd; each run takes `steps` steps and keeps
    about `records` records."""

    runs: tuple
    steps: int = 2000
    records: int = 100

    def __post_init__(self):
        if not isinstance(self.runs, tuple) or not self.runs:
            raise ValueError(f"`runs` must be a non-empty tuple of runs; got {self.runs!r}")
        object.__setattr__(self, "runs", tuple(_race_run(r) for r in self.runs))
        labels = [r[0] for r in self.runs]
        if len(set(labels)) != len(labels):
            raise ValueError(f"`runs` must have distinct labels; got {labels}")
        object.__setattr__(self, "steps", check_int("steps", self.steps, 1, MAX_STEPS))
        object.__setattr__(self, "records", check_int("records", self.records, 1, MAX_STEPS))


def _race_run(run) -> tuple:
    """(label, optimizer, lr, p) checked as `train` checks them."""
    if not isinstance(run, tuple) or len(run) != 4:
        raise ValueError(f"`runs` must hold (label, optimizer, lr, p) tuples; got {run!r}")
    label, opt, lr, p = run
    check_choice("optimizer", opt, OPTIMIZERS)
    if opt in ("md", "nmd"):
        p = None if p is None else check_float("p", p, MIN_P, MAX_P)
    elif p is not None:
        raise ValueError(f"`p` must be None unless optimizer is 'md' or 'nmd'; got {p!r}")
    return str(label), opt, check_float("lr", lr, 0.0, 1e3, lo_open=True), p


def race(prob: Problem, s: RaceSettings) -> dict:
    """Several optimizers from the same start (W_0 = 0) on one problem, in the GD engine
    (`attsvm.train(optimizer=…)`, exact gradients), for the Optimizer → norm page: each run
    of `s.runs` for `s.steps` steps, recorded every steps // records (or the next divisor
    of steps below).

    Returns:
        {label: (steps (k,), W (k, d, d))}.
    """
    steps = s.steps
    every = max(1, steps // s.records)
    while steps % every:  # record_every must divide steps
        every -= 1
    out = {}
    for label, opt, lr, p in s.runs:
        r = train(
            prob,
            optimizer=opt,
            p=p,
            steps=steps,
            lr=lr,
            init=np.zeros((prob.d, prob.d)),
            record_every=every,
        )
        out[label] = (r.steps, r.W)
    return out


def race_summary(
    prob: Problem, race: dict, *, p: float, threshold: float, steps: int, solve
) -> dict:
    """What the Optimizer → norm page shows of an optimizer race (`race`).

    For each optimizer's final W: its selection α (argmax of the logits), and for each norm
    of `race_norms(p)` the Att-SVM_α (`solve(alpha_key, norm, p)`), the correlation of W
    with it and the margin ratio min_j ⟨A_j, W⟩ / ‖W‖ · ‖W^mm‖ (1 iff W/‖W‖ solves that
    norm's SVM, a fair measure where the SVM is not unique); for the norm theory pairs with
    the optimizer, the first step with corr ≥ `threshold`.

    Returns: {"heat": rows (optimizer, norm, correlation, margin ratio), "selected":
    {label: α text}, "growth": rows (step, ‖W‖_F, optimizer), "reach": rows (optimizer,
    target, steps, status, citation)}.
    """
    from .svm import constraint_rows, matrix_norm

    Qv, _, mask = prob.query_view()
    heat, sel, grow, reach = [], {}, [], []
    for o, (k, W) in race.items():
        label, target, status, cite = OPTIMIZER_THEORY[o]
        a = np.where(prob.token_mask(), np.einsum("ntd,de,nke->nkt", prob.X, W[-1], Qv), -np.inf)
        alpha = a.argmax(-1) if Qv.shape[1] > 1 else a.argmax(-1)[:, 0]
        sel[label] = " ".join(map(str, np.ravel(alpha)))
        grow.append(
            pd.DataFrame(
                {"step": k[1:], "‖W‖_F": np.linalg.norm(W[1:], axis=(1, 2)), "optimizer": label}
            )
        )
        A, _ = constraint_rows(prob, alpha)
        key = tuple(map(tuple, alpha.tolist())) if alpha.ndim == 2 else tuple(alpha.tolist())
        for norm, q, name in race_norms(p):
            sol = solve(key, norm, q)
            if not sol.feasible:
                heat.append(
                    dict(optimizer=label, norm=name, correlation=np.nan, **{"margin ratio": np.nan})
                )
                continue
            cor = correlation(W[1:], sol.W)  # (k,)
            ratio = (A @ W[-1].ravel()).min() / matrix_norm(W[-1], norm, q) * sol.objective
            heat.append(
                dict(optimizer=label, norm=name, correlation=cor[-1], **{"margin ratio": ratio})
            )
            if norm == target:
                hit = np.nonzero(cor >= threshold)[0]
                reach.append(
                    dict(
                        optimizer=label,
                        target=name,
                        steps=f"{k[1:][hit[0]]:,}" if len(hit) else f"> {steps:,}",
                        status=status,
                        citation=cite,
                    )
                )
    return dict(
        heat=pd.DataFrame(heat), selected=sel, growth=pd.concat(grow), reach=pd.DataFrame(reach)
    )
