"""The regularization path (docs/theory.md §2.10, theorems RP-W and RP-KQ).

    W_R = argmin_{‖W‖_F ≤ R} L(W)                       → W^mm / ‖W^mm‖_F     (R → ∞)
    (K_R, Q_R) = argmin_{‖K‖²_F + ‖Q‖²_F ≤ 2R} L(K Qᵀ)   → W^mm_* / ‖W^mm_*‖_*

Linear head, logistic loss. At large R the loss differs from its infimum by ~e^{−R·margin},
below float64 resolution of L itself, so we minimize the excess loss in log form, exactly:
with γ_it = Y_i vᵀx_it, o_i = argmax_t γ_it, δ_i = Σ_t s_it (γ_io − γ_it) ≥ 0,

    L(W) − Σ_i ℓ(γ_io)/n = (1/n) Σ_i log1p(expm1(δ_i) σ(−γ_io)),

and log δ_i = logsumexp_t(log s_it + log(γ_io − γ_it)) keeps full relative precision. The
constraint is active (the loss keeps decreasing outward), so we minimize on the sphere
‖W‖_F = R (resp. ‖K‖² + ‖Q‖² = 2R) by L-BFGS in the radial-free parameterization
W = R U/‖U‖, warm-started along R plus random restarts (the loss is not convex); the best
of those is reported.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.optimize import minimize

from .. import limits
from ..metrics import correlation
from ..problems import check_float, check_subset, random_problem, token_scores
from ..svm import solve_att_svm
from .core import (
    Experiment,
    Progress,
    Result,
    check_settings,
    fmt,
    no_progress,
    ordered_concat,
    settings_dict,
)

NAME = "regularization-path"
# not HELPED: its two paths (≈ 1 s each) do not pay for starting a helper, but share one
# that another experiment started (`reproduce all`)
TITLE = "Regularization path: argmin over the norm ball, against the SVM directions"
PAPER = (
    "theorems (no experiment in the authors' repository): corr(W_R, W^mm) → 1 and "
    "corr(K_R Q_Rᵀ, W^mm_*) → 1 as R → ∞"
)


@dataclass(frozen=True, kw_only=True)
class Settings:
    """n, T, d, data_seed: the random instance (cross-attention, linear head); radii: R
    values, geometric from r_min to r_max; restarts: random starts per R besides the warm
    start; params: "W" and/or "KQ"; seed: restart seed."""

    n: int = 6
    T: int = 8
    d: int = 10
    data_seed: int = 0
    r_min: float = 0.5
    r_max: float = 500.0
    radii: int = 24
    restarts: int = 2
    params: tuple = ("W", "KQ")
    seed: int = 0

    def __post_init__(self):
        check_settings(self, n=(1, 32), T=(2, 32), d=(1, 32), radii=(2, 200), restarts=(0, 20))
        check_float("r_min", self.r_min, 0.0, 1e4, lo_open=True)
        check_float("r_max", self.r_max, self.r_min, 1e5)
        object.__setattr__(self, "params", check_subset("params", self.params, ("W", "KQ")))


def logsumexp(a, axis=None, keepdims: bool = False):
    """log Σ exp(a) over `axis` for real a: scipy.special.logsumexp's own algorithm
    (scipy 1.17: the maximal entries taken out of the sum, log1p(Σ_rest e^(a − max)/m) +
    log m + max with m their count; where that is not finite, log Σ e^a), written in plain
    numpy. The same numbers (tests/test_experiments.py checks bit for bit), without the
    array-API dispatch that made scipy's 190 µs a call here, most of this experiment's time
    (28 000 calls)."""
    a = np.atleast_1d(np.asarray(a, dtype=float))
    ax = tuple(range(a.ndim)) if axis is None else axis
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        direct = np.log(np.sum(np.exp(a), axis=ax, keepdims=True))
        top = np.max(a, axis=ax, keepdims=True)
        is_top = a == top
        m = np.sum(is_top.astype(a.dtype), axis=ax, keepdims=True)
        rest = np.sum(np.exp(np.where(is_top, -np.inf, a) - top), axis=ax, keepdims=True)
        rest = np.where(rest == 0, rest, rest / m)
        out = np.log1p(rest) + np.log(m) + top
    out = np.where(np.isfinite(out), out, direct)
    out = out if keepdims else np.squeeze(out, axis=ax)
    return out[()] if out.ndim == 0 else out


class _Excess:
    """log of the excess risk and its gradient in W (linear head, logistic loss)."""

    def __init__(self, prob):
        self.X, self.Z, self.n = prob.X, prob.Z, prob.n
        g = token_scores(prob)  # (n, T)
        o = g.argmax(-1)
        self.gap = g[np.arange(prob.n), o][:, None] - g  # γ_io − γ_it ≥ 0
        with np.errstate(divide="ignore"):
            self.log_gap = np.log(self.gap)  # −inf at o
        self.c = 1.0 / (1.0 + np.exp(g[np.arange(prob.n), o]))  # σ(−γ_io)

    def __call__(self, W):
        a = np.einsum("ntd,de,ne->nt", self.X, W, self.Z)
        log_s = a - logsumexp(a, axis=1, keepdims=True)
        log_delta = logsumexp(log_s + self.log_gap, axis=1)  # (n,)
        delta = np.exp(log_delta)
        # log E_i = log log1p(expm1(δ) c), computed from log δ when δ is tiny
        big = delta > 1e-8
        ei = np.where(
            big,
            np.log(np.log1p(np.expm1(np.minimum(delta, 700.0)) * self.c)),
            log_delta + np.log(self.c) + np.log1p(0.5 * delta * (1 - 2 * self.c)),
        )
        val = logsumexp(ei) - np.log(self.n)
        # ∂ log E/∂δ_i = (E_i / Σ E) · (∂ log E_i/∂δ_i); ∂δ_i/∂a_it = s_it (gap_it − δ_i)
        w = np.exp(ei - logsumexp(ei))
        dlog = np.where(
            big,
            np.exp(np.minimum(delta, 700.0))
            * self.c
            / (1.0 + np.expm1(np.minimum(delta, 700.0)) * self.c)
            / np.exp(np.where(big, ei, 0.0)),
            1.0 / delta,
        )
        # s_it·(gap_it − δ_i)·dlog_i, with s/δ formed in logs when δ is tiny
        coef = np.exp(log_s) * (self.gap - delta[:, None]) * (w * dlog)[:, None]
        grad = np.einsum("nt,ntd,ne->de", coef, self.X, self.Z)
        return float(val), grad


def _on_sphere(fun, radius, x0):
    """minimize fun(radius · x/‖x‖) over x by L-BFGS; returns (value, point)."""

    def f(x):
        nx = np.linalg.norm(x)
        u = x / nx
        val, g = fun(radius * u)
        g = g * radius
        return val, (g - u * (u @ g)) / nx

    res = minimize(
        f, x0, jac=True, method="L-BFGS-B", options=dict(maxiter=500, gtol=1e-10, ftol=1e-14)
    )
    x = res.x / np.linalg.norm(res.x)
    return float(res.fun), radius * x


def _size(s: Settings, param: str) -> int:
    """The numbers of one point of the path: W (d²) or K and Q (2d²)."""
    return s.d * s.d * (1 if param == "W" else 2)


def _draws(s: Settings, param: str) -> int:
    """The standard normals one path draws for its random starts: restarts + 1 at the first
    R (no warm start yet), restarts at each later one."""
    return (s.restarts + 1 + (s.radii - 1) * s.restarts) * _size(s, param)


def _path(s: Settings, prob, param: str, skip: int, W_fro, W_nuc) -> list:
    """One parameterization's rows along R: L-BFGS on the sphere from the last R's answer
    (warm) and `s.restarts` random starts, the best kept. The starts come from
    default_rng(s.seed) after the `skip` normals of the paths before this one (each
    standard normal takes its own raw draws, so this is the stream one loop over the
    params would read), so a path's numbers do not depend on where it ran."""
    ex = _Excess(prob)
    d = s.d
    rng = np.random.default_rng(s.seed)
    rng.standard_normal(skip)
    if param == "W":

        def fun(x):
            val, G = ex(x.reshape(d, d))
            return val, G.ravel()

        radius_of = lambda R: R  # noqa: E731
        to_W = lambda x: x.reshape(d, d)  # noqa: E731
    else:  # x = [K; Q] stacked, ‖x‖² = ‖K‖² + ‖Q‖² = 2R

        def fun(x):
            K, Q = x[: d * d].reshape(d, d), x[d * d :].reshape(d, d)
            val, G = ex(K @ Q.T)
            return val, np.concatenate([(G @ Q).ravel(), (G.T @ K).ravel()])

        radius_of = lambda R: np.sqrt(2.0 * R)  # noqa: E731
        to_W = lambda x: x[: d * d].reshape(d, d) @ x[d * d :].reshape(d, d).T  # noqa: E731
    size = _size(s, param)
    warm, rows = None, []
    for R in np.geomspace(s.r_min, s.r_max, s.radii):
        starts = ([warm] if warm is not None else []) + [
            rng.standard_normal(size) for _ in range(s.restarts + (warm is None))
        ]
        best = min((_on_sphere(fun, radius_of(R), x0) for x0 in starts), key=lambda r: r[0])
        warm = best[1]
        W = to_W(best[1])
        rows.append(
            dict(
                param=param,
                R=R,
                log_excess_loss=best[0],
                norm_W=float(np.linalg.norm(W)),
                corr_fro=correlation(W, W_fro),
                corr_nuc=correlation(W, W_nuc) if W_nuc is not None else np.nan,
            )
        )
    return rows


def run(s: Settings = Settings(), *, progress: Progress = no_progress) -> Result:
    """The experiment in order: the SVMs, then the argmin over each ball radius R for each
    parameterization (`_path`; the two paths shared with a helper process where the caller
    allows them, `ordered_concat`; the CLI does), then the correlations."""
    prob = random_problem(s.n, s.T, s.d, seed=s.data_seed)
    svm = {norm: solve_att_svm(prob, None, norm) for norm in ("fro", "nuc")}
    if not svm["fro"].feasible:
        raise ValueError(
            f"`data_seed` must give a feasible Att-SVM at opt; got {s.data_seed} "
            f"({svm['fro'].status})"
        )
    W_nuc = svm["nuc"].W if svm["nuc"].feasible else None
    items, skip = [], 0
    for param in s.params:
        items.append((s, prob, param, skip, svm["fro"].W, W_nuc))
        skip += _draws(s, param)
    rows = ordered_concat(_path, items, progress=lambda f, t: progress(f, f"paths {t}"))
    path = pd.DataFrame(rows)
    parts = []
    for param in s.params:
        g = path[path.param == param].iloc[-1]
        own = "corr_fro" if param == "W" else "corr_nuc"
        other = "corr_nuc" if param == "W" else "corr_fro"
        name = ("W^mm", "W^mm_*") if param == "W" else ("W^mm_*", "W^mm")
        parts.append(
            f"{param} at R={g.R:.3g}: corr with {name[0]} {fmt(g[own], 5)}, with "
            f"{name[1]} {fmt(g[other], 3)}"
        )
    summary = {
        "paper": PAPER,
        "text": "; ".join(parts),
        "rows": [
            dict(param=r.param, R=r.R, corr_fro=r.corr_fro, corr_nuc=r.corr_nuc)
            for r in path.groupby("param").tail(1).itertuples()
        ],
    }
    return Result(name=NAME, frames={"path": path}, summary=summary, settings=settings_dict(s))


# -- the record: what the registry, CLI, store, budget and Reproduce page read --------
def price(s: Settings) -> tuple:
    """(items, floats, sizes) of a run with `s` (`budget.Price`), from `run`'s loop sizes."""
    items = [
        (f"Att-SVM ({nm})", limits.svm_work(n=s.n, T=s.T, d=s.d, norm=nm)) for nm in ("fro", "nuc")
    ]
    mins = s.radii * (s.restarts + 1)
    for param in s.params:
        items.append(
            (
                f"{param}: {mins} minimizations over spheres",
                limits.sphere_work(n=s.n, T=s.T, d=s.d, param=param, minimizations=mins),
            )
        )
    return items, 0, dict(n=s.n, T=s.T, d=s.d, solves=2)


RECORD = Experiment(
    name=NAME,
    title=TITLE,
    paper=PAPER,
    Settings=Settings,
    run=run,
    price=price,
    chart="attsvm_charts.experiments:regularization_path",
    tiny=dict(n=3, T=4, d=4, radii=4, r_max=50.0, restarts=0),
)
