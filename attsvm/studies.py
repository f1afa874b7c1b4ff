"""The studies the app's pages show, as plain functions of settings records.

Each returns tidy DataFrames (or a small dict) and is deterministic in its arguments, so
the app caches it by its arguments. The paper's claims they probe (arXiv 2308.16898):

- `basins`: where GD from many initializations converges, which locally optimal α
  (Definition 2, Theorem 5 "local convergence");
- `overparam_cell` / `overparam_fractions`: how often GD reaches α = opt as d grows (§4.1,
  over-parameterization; also experiment "overparameterization");
- `rank_cell` / `rank_summary`: ranks of W^mm and W^mm_* (§3, Theorem 3; experiment
  "svm-rank");
- `generalized_fit`: GD on a nonlinear head against the generalized SVM (§6, eq. (10)).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .config import ProblemSpec, TrainSpec, record_every
from .metrics import correlation, numerical_rank
from .problems import Problem, optimal_tokens
from .svm import (
    classify_selection,
    locally_optimal_selections,
    solve_att_svm,
    solve_generalized_svm,
)
from .training import train, train_batch


def run(pspec: ProblemSpec, tspec: TrainSpec, every: int | None = None):
    """One GD run of the records, recorded every `every` steps (default: ~200 records)."""
    prob = pspec.build()
    r = every or record_every(tspec.steps)
    return train(prob, steps=tspec.steps, init=tspec.init_for(prob), record_every=r,
                 **tspec.train_kwargs(prob))


def _initializations(prob: Problem, tspec: TrainSpec, inits_seed: int, runs: int,
                     radius: float, plane: bool):
    """`runs` inits of Frobenius norm `radius` and their plane coordinates (see `basins`)."""
    d, m = prob.d, tspec.m_for(prob)
    rng = np.random.default_rng([inits_seed, 7])
    if plane:
        g = int(round(np.sqrt(runs)))
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
    inits = []        # balanced factors of each W: K = U√S, Q = V√S (rank m truncation)
    for W in Ws:
        U, S, Vt = np.linalg.svd(W)
        r = np.sqrt(S[:m])
        inits.append((U[:, :m] * r, Vt[:m].T * r))
    return inits, coords


def basins(pspec: ProblemSpec, tspec: TrainSpec, inits_seed: int, runs: int,
           radius: float, plane: bool) -> pd.DataFrame:
    """GD from `runs` initializations of Frobenius norm `radius` (random directions, or a
    √runs × √runs grid on the plane spanned by two random orthonormal directions E₁, E₂).

    Returns one row per run: a, b (plane coordinates or NaN), selection (tuple), prob
    (smallest selected softmax weight at the end).
    """
    prob = pspec.build()
    inits, coords = _initializations(prob, tspec, inits_seed, runs, radius, plane)
    run = train_batch([prob] * len(inits), steps=tspec.steps, init=inits,
                      record_every=tspec.steps, **tspec.train_kwargs(prob))
    alphas = run.alpha                                        # (B, n)
    sel = np.take_along_axis(run.probs[:, -1], alphas[..., None], -1)[..., 0].min(1)
    return pd.DataFrame({"a": coords[:, 0], "b": coords[:, 1],
                         "selection": [tuple(int(x) for x in a) for a in alphas],
                         "prob": sel})


def selections(pspec: ProblemSpec, norm: str = "fro") -> pd.DataFrame:
    """Every selection α with its status (`attsvm.locally_optimal_selections`)."""
    return pd.DataFrame(locally_optimal_selections(pspec.build(), norm=norm))


def overparam_cell(base: ProblemSpec, tspec: TrainSpec, d: int, runs: int) -> pd.DataFrame:
    """Runs with data seeds base.seed … base.seed+runs−1 at dimension d: what GD reached
    and whether the global SVM is feasible. One row per run."""
    specs = [base.with_(d=d, seed=base.seed + j) for j in range(runs)]
    probs = [s.build() for s in specs]
    run = train_batch(probs, steps=tspec.steps, init=None, record_every=tspec.steps,
                      **tspec.train_kwargs(probs[0]))
    norm = tspec.norm
    rows = []
    for j, (s, p) in enumerate(zip(specs, probs, strict=True)):
        alpha = tuple(int(a) for a in run.alpha[j])
        try:
            opt = tuple(int(a) for a in optimal_tokens(p))
            feasible = solve_att_svm(p, None, norm).feasible
        except ValueError:          # a tie: no unique optimal token
            opt, feasible = None, None
        rows.append(dict(d=d, seed=s.seed, selection=alpha, opt=opt, opt_feasible=feasible,
                         kind=classify_selection(p, np.array(alpha), norm=norm)))
    return pd.DataFrame(rows)


OVERPARAM_OUTCOMES = ("1 · GD reached α = opt (global)",
                      "2 · GD reached a locally optimal α (incl. global)",
                      "3 · Att-SVM for α = opt feasible")


def overparam_fractions(res: pd.DataFrame) -> pd.DataFrame:
    """Per d, the share of runs per outcome (`OVERPARAM_OUTCOMES`); tidy: d, outcome,
    fraction, runs. `res`: `overparam_cell` rows of several d."""
    rows = []
    for d, g in res.groupby("d"):
        total = len(g)
        fractions = ((g["kind"] == "global").mean(),
                     g["kind"].isin(["global", "local"]).mean(),
                     g["opt_feasible"].fillna(False).astype(bool).mean())
        rows += [dict(d=d, outcome=o, fraction=f, runs=total)
                 for o, f in zip(OVERPARAM_OUTCOMES, fractions, strict=True)]
    return pd.DataFrame(rows)


def rank_cell(n: int, T: int, d: int, seed0: int, instances: int,
              attention: str = "cross") -> pd.DataFrame:
    """Numerical ranks (σ_k > 1e-4·σ_1) of W^mm and W^mm_* on `instances` random problems."""
    rows = []
    for j in range(instances):
        spec = ProblemSpec(n=n, T=T, d=d, seed=seed0 + j, attention=attention)
        try:
            prob = spec.build()
            fro, nuc = solve_att_svm(prob, None, "fro"), solve_att_svm(prob, None, "nuc")
        except ValueError:      # tie in the optimal token
            continue
        rows.append(dict(n=n, T=T, d=d, seed=seed0 + j, feasible=fro.feasible,
                         rank_fro=numerical_rank(fro.W) if fro.feasible else np.nan,
                         rank_nuc=numerical_rank(nuc.W) if nuc.feasible else np.nan))
    return pd.DataFrame(rows, columns=["n", "T", "d", "seed", "feasible", "rank_fro",
                                       "rank_nuc"])


def rank_summary(res: pd.DataFrame) -> pd.DataFrame:
    """Per (n, d) and norm: mean / min / max rank over feasible instances, their count and
    the feasible fraction. `res`: `rank_cell` rows."""
    rows = []
    for (n, d), g in res.groupby(["n", "d"]):
        f = g[g["feasible"]]
        for norm, col in (("W^mm (Frobenius)", "rank_fro"), ("W^mm_* (nuclear)", "rank_nuc")):
            v = f[col].dropna()
            rows.append(dict(d=d, n=f"n = {n}", norm=norm, count=len(v),
                             rank=v.mean() if len(v) else np.nan,
                             lo=v.min() if len(v) else np.nan, hi=v.max() if len(v) else np.nan,
                             feasible=g["feasible"].mean()))
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
        R = np.einsum("kij,ij->k", run.W - gen.W_fin, gen.W_dir) / float(np.sum(gen.W_dir ** 2))
        pred = gen.W_fin[None] + R[:, None, None] * gen.W_dir[None]     # (k, d, d)
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
    "nmd": ("normalized ℓp-MD", "lp", "proved for MD (local); normalized: the authors' code",
            "arXiv 2410.14581"),
    "sign": ("signGD", "max", "open for attention (linear models: 2502.04664, 1802.08246)", "—"),
    "spectral": ("spectral descent", "spectral", "open for attention (linear: 2502.04664)", "—"),
}


def race_norms(p: float) -> list:
    """(norm, p, label) of the five Att-SVMs an optimizer race is compared with."""
    return [("fro", None, "Frobenius"), ("nuc", None, "nuclear"), ("lp", float(p), f"ℓ{p:g}"),
            ("max", None, "ℓ∞ (max)"), ("spectral", None, "spectral")]


def race(prob: Problem, runs, *, steps: int, records: int = 100) -> dict:
    """Several optimizers from the same start (W_0 = 0) on one problem, in the GD engine
    (`attsvm.train(optimizer=…)`, exact gradients), for the Optimizer → norm page.

    Args:
        runs: (label, optimizer, lr, p) tuples (p None unless md/nmd).
        steps: steps of each run; about `records` records are kept (every steps // records).

    Returns:
        {label: (steps (k,), W (k, d, d))}.
    """
    every = max(1, steps // records)
    while steps % every:        # record_every must divide steps
        every -= 1
    out = {}
    for label, opt, lr, p in runs:
        r = train(prob, optimizer=opt, p=p, steps=steps, lr=lr, init=np.zeros((prob.d, prob.d)),
                  record_every=every)
        out[label] = (r.steps, r.W)
    return out


def race_summary(prob: Problem, race: dict, *, p: float, threshold: float, steps: int,
                 solve) -> dict:
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
        a = np.where(mask[None], np.einsum("ntd,de,nke->nkt", prob.X, W[-1], Qv), -np.inf)
        alpha = a.argmax(-1) if Qv.shape[1] > 1 else a.argmax(-1)[:, 0]
        sel[label] = " ".join(map(str, np.ravel(alpha)))
        grow.append(pd.DataFrame({"step": k[1:], "‖W‖_F": np.linalg.norm(W[1:], axis=(1, 2)),
                                  "optimizer": label}))
        A, _ = constraint_rows(prob, alpha)
        key = tuple(map(tuple, alpha.tolist())) if alpha.ndim == 2 else tuple(alpha.tolist())
        for norm, q, name in race_norms(p):
            sol = solve(key, norm, q)
            if not sol.feasible:
                heat.append(dict(optimizer=label, norm=name, correlation=np.nan,
                                 **{"margin ratio": np.nan}))
                continue
            cor = correlation(W[1:], sol.W)                       # (k,)
            ratio = (A @ W[-1].ravel()).min() / matrix_norm(W[-1], norm, q) * sol.objective
            heat.append(dict(optimizer=label, norm=name, correlation=cor[-1],
                             **{"margin ratio": ratio}))
            if norm == target:
                hit = np.nonzero(cor >= threshold)[0]
                reach.append(dict(optimizer=label, target=name,
                                  steps=f"{k[1:][hit[0]]:,}" if len(hit) else f"> {steps:,}",
                                  status=status, citation=cite))
    return dict(heat=pd.DataFrame(heat), selected=sel, growth=pd.concat(grow),
                reach=pd.DataFrame(reach))
