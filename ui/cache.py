"""Cached library calls. Keys are specs (hashable dataclasses) and plain values, so sessions
with the same URL share results; every cache is bounded (`max_entries`, `ttl`).

Budgets (`attsvm.limits`) are checked by the callers *before* these run (see
`ui.widgets.check_gd`), so an oversize request never reaches a cache. Each computing body is
`hosted.metered`: on a miss it holds a compute slot and is charged to the session.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

import attsvm

from . import hosted
from .specs import CHUNK_RECORDS, ProblemSpec, TrainSpec, record_every

TTL = 3600


def _train_kwargs(prob: attsvm.Problem, t: TrainSpec) -> dict:
    return dict(param=t.param, lr=t.lr, normalized=t.normalized, loss=t.loss,
                seed=t.init_seed, m=t.m_for(prob))


train_kwargs = _train_kwargs      # public: the Export bundle records these GD settings


@st.cache_data(max_entries=48, ttl=TTL, show_spinner="Running gradient descent…")
@hosted.metered
def train(pspec: ProblemSpec, tspec: TrainSpec, every: int | None = None) -> attsvm.Trajectory:
    """One GD run, recorded every `every` steps (default: ~200 records)."""
    prob = pspec.build()
    r = every or record_every(tspec.steps)
    return attsvm.train(prob, steps=tspec.steps, init=tspec.init_for(prob), record_every=r,
                        **_train_kwargs(prob, tspec))


@hosted.metered
def advance(prob: attsvm.Problem, tspec: TrainSpec, init, records: int, every: int):
    """`records`·`every` more GD steps from `init` (None: the spec's initialization).
    Not cached: it is one session's live run. Returns a Trajectory."""
    init = tspec.init_for(prob) if init is None else init
    return attsvm.train(prob, steps=records * every, init=init, record_every=every,
                        **_train_kwargs(prob, tspec))


@st.cache_data(max_entries=32, ttl=TTL, show_spinner="Running gradient descent…")
@hosted.metered
def live_full(pspec: ProblemSpec, tspec: TrainSpec) -> dict:
    """The playground's whole run, built from the same chunks as live play (so Play, Step
    and this agree to the last bit). Returns the live-run record (see ui.live)."""
    from .live import new_run, step_run  # local import: live imports this module
    prob = pspec.build()
    run = new_run(pspec, tspec)
    while not run["done"]:
        step_run(run, prob, tspec, CHUNK_RECORDS)
    return run


@st.cache_data(max_entries=512, ttl=TTL, show_spinner=False)
@hosted.metered
def svm(pspec: ProblemSpec, alpha: tuple | None, norm: str) -> attsvm.SvmSolution:
    """Att-SVM_α (norm "fro") or Att-SVM*_α ("nuc"); alpha None means α = opt."""
    prob = pspec.build()
    return attsvm.solve_att_svm(prob, None if alpha is None else np.array(alpha), norm)


def classify(pspec: ProblemSpec, alpha: tuple, norm: str = "fro") -> str:
    """"global" / "local" / "feasible" / "infeasible" for selection α (cached SVM)."""
    prob = pspec.build()
    sol = svm(pspec, alpha, norm)
    if not sol.feasible:
        return "infeasible"
    if not attsvm.is_locally_optimal(prob, np.array(alpha), solution=sol):
        return "feasible"
    try:
        opt = attsvm.optimal_tokens(prob)
    except ValueError:
        return "local"
    return "global" if np.array_equal(opt, np.array(alpha)) else "local"


@st.cache_data(max_entries=16, ttl=TTL, show_spinner="Solving the SVM of every selection…")
@hosted.metered
def selections(pspec: ProblemSpec, norm: str = "fro") -> pd.DataFrame:
    """Every selection α with its status (attsvm.locally_optimal_selections)."""
    rows = attsvm.locally_optimal_selections(pspec.build(), norm=norm)
    return pd.DataFrame(rows)


@st.cache_data(max_entries=16, ttl=TTL, show_spinner="Running GD from many initializations…")
@hosted.metered
def batch_alphas(pspec: ProblemSpec, tspec: TrainSpec, inits_seed: int, runs: int,
                 radius: float, plane: bool) -> pd.DataFrame:
    """GD from `runs` initializations of Frobenius norm `radius` (random directions, or a
    √runs × √runs grid on the plane spanned by two random orthonormal directions E₁, E₂).

    Returns one row per run: a, b (plane coordinates or NaN), selection (tuple), prob
    (smallest selected softmax weight at the end).
    """
    prob = pspec.build()
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
        inits = list(Ws)
    else:   # balanced factors of each W: K = U√S, Q = V√S (rank m truncation)
        inits = []
        for W in Ws:
            U, S, Vt = np.linalg.svd(W)
            r = np.sqrt(S[:m])
            inits.append((U[:, :m] * r, Vt[:m].T * r))
    run = attsvm.train_batch([prob] * len(inits), steps=tspec.steps, init=inits,
                             record_every=tspec.steps, **_train_kwargs(prob, tspec))
    alphas = run.alpha                                        # (B, n)
    sel = np.take_along_axis(run.probs[:, -1], alphas[..., None], -1)[..., 0].min(1)
    return pd.DataFrame({"a": coords[:, 0], "b": coords[:, 1],
                         "selection": [tuple(int(x) for x in a) for a in alphas],
                         "prob": sel})


@st.cache_data(max_entries=64, ttl=TTL, show_spinner=False)
@hosted.metered
def overparam_cell(base: ProblemSpec, tspec: TrainSpec, d: int, runs: int) -> pd.DataFrame:
    """Runs with data seeds base.seed … base.seed+runs−1 at dimension d: what GD reached
    and whether the global SVM is feasible. One row per run."""
    specs = [base.with_(d=d, seed=base.seed + j) for j in range(runs)]
    probs = [s.build() for s in specs]
    kw = _train_kwargs(probs[0], tspec)
    run = attsvm.train_batch(probs, steps=tspec.steps, init=None, record_every=tspec.steps,
                             **kw)
    norm = "fro" if tspec.param == "W" else "nuc"
    rows = []
    for j, (s, p) in enumerate(zip(specs, probs, strict=True)):
        alpha = tuple(int(a) for a in run.alpha[j])
        try:
            opt = tuple(int(a) for a in attsvm.optimal_tokens(p))
            feasible = svm(s, None, norm).feasible
        except ValueError:          # a tie: no unique optimal token
            opt, feasible = None, None
        rows.append(dict(d=d, seed=s.seed, selection=alpha, opt=opt, opt_feasible=feasible,
                         kind=classify(s, alpha, norm)))
    return pd.DataFrame(rows)


@st.cache_data(max_entries=64, ttl=TTL, show_spinner=False)
@hosted.metered
def rank_cell(n: int, T: int, d: int, seed0: int, instances: int,
              attention: str = "cross") -> pd.DataFrame:
    """Numerical ranks (σ_k > 1e-4·σ_1) of W^mm and W^mm_* on `instances` random problems."""
    rows = []
    for j in range(instances):
        spec = ProblemSpec(n=n, T=T, d=d, seed=seed0 + j, attention=attention)
        try:
            fro, nuc = svm(spec, None, "fro"), svm(spec, None, "nuc")
        except ValueError:      # tie in the optimal token
            continue
        rows.append(dict(n=n, T=T, d=d, seed=seed0 + j, feasible=fro.feasible,
                         rank_fro=attsvm.numerical_rank(fro.W) if fro.feasible else np.nan,
                         rank_nuc=attsvm.numerical_rank(nuc.W) if nuc.feasible else np.nan))
    return pd.DataFrame(rows, columns=["n", "T", "d", "seed", "feasible", "rank_fro",
                                       "rank_nuc"])


@st.cache_data(max_entries=16, ttl=TTL, show_spinner="Solving the generalized SVM…")
@hosted.metered
def generalized(pspec: ProblemSpec, tspec: TrainSpec, threshold: float) -> dict:
    """GD + the generalized SVM (W^dir, W^fin, R) of its last iterate + the 1-token SVM."""
    prob = pspec.build()
    run = train(pspec, tspec)
    norm = "fro" if tspec.param == "W" else "nuc"
    gen = attsvm.solve_generalized_svm(prob, run.W[-1], threshold=threshold, norm=norm)
    one = attsvm.solve_att_svm(prob, run.alpha, norm)
    return dict(run=run, gen=gen, one=one)


# -- Optimizer → norm page (issue 11) ----------------------------------------------------------
@st.cache_data(max_entries=16, ttl=TTL, show_spinner="Racing the optimizers…")
@hosted.metered
def optimizer_race(pspec: ProblemSpec, runs: tuple, steps: int) -> dict:
    """W(k) of each (name, optimizer, lr, p) of `runs` from W_0 = 0 on the spec's problem,
    ~100 records. Returns {name: (steps (k,), W (k, d, d))}."""
    from attsvm.optimizers import run_optimizer
    prob = pspec.build()
    every = max(1, steps // 100)
    out = {}
    for name, opt, lr, p in runs:
        r = run_optimizer(prob, optimizer=opt, steps=steps, lr=lr, p=p, record_every=every)
        out[name] = (r.steps, r.W)
    return out


@st.cache_data(max_entries=512, ttl=TTL, show_spinner=False)
@hosted.metered
def svm_norm(pspec: ProblemSpec, alpha: tuple, norm: str, p: float | None = None):
    """The Att-SVM_α in any norm of `attsvm.solve_att_svm` (α nested tuples for queries)."""
    return attsvm.solve_att_svm(pspec.build(), np.array(alpha), norm, p=p)
