"""Gradient descent on next-token prediction (arXiv 2403.08081; the authors'
`train_utils.py`), and the decomposition W(τ) ≈ W^fin + R(τ)·W^svm.

    a_it = x_itᵀ W z_i  (z_i = x_iT),  s_i = softmax over the attendable tokens (mask)
    head "iden": p_i = Σ_{t: ids_it = y_i} s_it          (attention mass on the label)
    head "gen":  h_i = E X_iᵀ s_i ∈ R^K,  p_i = softmax(h_i)_{y_i}
    loss "nll":  ℓ_i = −log p_i;   "lsq2": ℓ_i = (1 − p_i)²;   L(W) = Σ_i w_i ℓ_i (w_i = 1/n)
    "ngd":  W ← W − η ∇L / (‖∇L‖_F + ε₀),  ε₀ = 2⁻⁵² (the authors');   "gd": W ← W − η ∇L.

With the identity head, −log p_i is computed as softplus(LSE_{t∉y}(a) − LSE_{t∈y}(a)): the
textbook logsumexp(a) − a_y has the gradient s − onehot(y), whose label entry s_y − 1 cancels
to 0 in float64 once 1 − s_y < 2⁻⁵³ (the softmax-gradient cancellation). The authors add
ε₀ inside the log (log(p + ε₀)); that shifts nothing at these scales (relative 1e-16).

A gradient that is pure roundoff (‖∇L‖ below 1e-13 of the sum of the absolute per-token
contributions) is treated as 0: a normalized step would otherwise blow it up into a unit
step in a random direction. This is what keeps W^fin exactly 0 on symmetric 2-cycles, where
the authors' torch gradient cancels to exactly 0 ("Norm of grad: 0.").

GD runs in the attention GD engine (`engine.simulate`, with this model's `value_and_grad`):
one compiled program per batch shape, lr and record_every traced (no recompile on a new
value), the engine's rules, records and overflow handling.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial
from typing import NamedTuple

import numpy as np

from .. import engine
from ..model import jax, jnp
from ..optimizers import Hyper, Optimizer, OptState, make_optimizer
from ..problems import check_choice, check_float, check_int, check_record_every
from .graph import cyclic_basis, project, reduced_mask, scc_ids, top_scc_mass
from .problem import NTPProblem

HEADS = ("iden", "gen")
LOSSES = ("nll", "lsq2")
OPTIMIZERS = ("ngd", "gd")
NORM_EPS = 2.0**-52
ROUNDOFF = 1e-13
MAX_STEPS = 200_000


class NTPData(NamedTuple):
    """Arrays of one problem as they cross `jit`."""

    X: jnp.ndarray  # (n, T, d) tokens
    z: jnp.ndarray  # (n, d) queries
    mask: jnp.ndarray  # (n, T) bool: attendable
    lab: jnp.ndarray  # (n, T) bool: the label's position(s)
    y: jnp.ndarray  # (n,) label ids
    E: jnp.ndarray  # (K, d) vocabulary (gen head)
    w: jnp.ndarray  # (n,) loss weights


def _lse(a, m):
    """log Σ_{m} e^a over the last axis; −inf where m is empty (gradient-safe)."""
    amax = jax.lax.stop_gradient(jnp.max(jnp.where(m, a, -jnp.inf), axis=-1, keepdims=True))
    amax = jnp.where(jnp.isfinite(amax), amax, 0.0)
    s = jnp.sum(jnp.where(m, jnp.exp(a - amax), 0.0), axis=-1)
    ok = s > 0
    return jnp.where(ok, amax[..., 0] + jnp.log(jnp.where(ok, s, 1.0)), -jnp.inf)


def _per_sample(a, data: NTPData, head: str, loss: str):
    """ℓ_i from logits a (n, T); also s (n, T)."""
    s = jax.nn.softmax(jnp.where(data.mask, a, -jnp.inf), axis=-1)
    if head == "iden":
        if loss == "nll":
            delta = _lse(a, data.mask & ~data.lab) - _lse(a, data.mask & data.lab)
            return jax.nn.softplus(delta), s
        p = jnp.sum(jnp.where(data.lab, s, 0.0), axis=-1)
        return (1.0 - p) ** 2, s
    h = jnp.einsum("kd,ntd,nt->nk", data.E, data.X, s)  # (n, K) logits E X_iᵀ s_i
    logp = jax.nn.log_softmax(h, axis=-1)
    lp = jnp.take_along_axis(logp, data.y[:, None], axis=-1)[:, 0]
    if loss == "nll":
        return -lp, s
    return (1.0 - jnp.exp(lp)) ** 2, s


def logits(W, data: NTPData):
    return jnp.einsum("ntd,de,ne->nt", data.X, W, data.z)


def value_and_grad(data: NTPData, head: str, loss: str):
    """The engine's model hook (`engine.simulate(value_and_grad=…)`): W → ((L, (L, s, W, 0)),
    ∇L) on one run's `data`, ∇L = Σ_it (∂L/∂a_it) x_it z_iᵀ from the logits' gradient, set
    to exactly 0 when it is roundoff (`ROUNDOFF`, module doc)."""
    vg = jax.value_and_grad(partial(_objective, data=data, head=head, loss=loss), has_aux=True)
    xn = jnp.linalg.norm(data.X, axis=-1)  # (n, T)
    zn = jnp.linalg.norm(data.z, axis=-1)  # (n,)

    def value_and_grad_W(W):
        (L, s), ga = vg(logits(W, data))  # ga: (n, T)
        G = jnp.einsum("nt,ntd,ne->de", ga, data.X, data.z)
        scale = jnp.sum(jnp.abs(ga) * xn * zn[:, None])
        gn = jnp.sqrt(jnp.sum(G * G))
        G = jnp.where(gn <= ROUNDOFF * scale, 0.0, G)
        return (L, (L, s, W, jnp.zeros((), W.dtype))), G

    return value_and_grad_W


def _objective(a, *, data: NTPData, head: str, loss: str):
    ell, s = _per_sample(a, data, head, loss)
    return jnp.sum(data.w * ell), s


def _authors_ngd(G, state: OptState, W, hyper: Hyper):
    """The authors' normalized step, W ← W − η ∇L / (‖∇L‖_F + ε₀) (`train_utils.py`), with
    the plain Frobenius norm (the attention rule "ngd" scales it by max|∇L| first, which
    rounds differently)."""
    gn = jnp.sqrt(jnp.sum(G * G))
    return W - hyper.lr * (G / (gn + hyper.eps)), state._replace(count=state.count + 1)


RULES = {"ngd": Optimizer(init=make_optimizer("gd").init, update=_authors_ngd), "gd": "gd"}


def compile_count() -> int:
    """How many programs the GD engine has compiled in this process (next-token runs
    included: they run in it, `engine.simulate`)."""
    return engine.compile_count()


@dataclass(frozen=True, eq=False)
class NTPTrajectory:
    """Records of GD after steps 0, r, 2r, …, `steps` (a batch adds a leading run axis).

    Attributes:
        W: (k, d, d) W(τ). probs: (k, n, T) attention s_it. loss: (k,) L(W(τ)).
        grad_norm: (k,) ‖∇L(W(τ))‖_F. steps: (k,) iteration numbers. settings: the call's.
    """

    W: np.ndarray
    probs: np.ndarray
    loss: np.ndarray
    grad_norm: np.ndarray
    steps: np.ndarray
    settings: dict

    def __getitem__(self, b: int) -> "NTPTrajectory":
        return NTPTrajectory(
            W=self.W[b],
            probs=self.probs[b],
            loss=self.loss[b],
            grad_norm=self.grad_norm[b],
            steps=self.steps,
            settings=self.settings,
        )

    def __len__(self) -> int:
        return self.W.shape[0] if self.W.ndim == 4 else 1

    @property
    def final(self) -> np.ndarray:
        return self.W[..., -1, :, :]


def problem_data(prob: NTPProblem, mask=None, weights=None) -> dict:
    """The engine's arrays for `prob`; `mask` (n, T) restricts the attendable tokens
    (rows that are all False keep every token, with weight 0)."""
    n, T = prob.n, prob.T
    full = np.ones((n, T), bool)
    w = np.full(n, 1.0 / n)
    if mask is not None:
        mask = np.asarray(mask, bool)
        kept = mask.any(1)
        w = np.where(kept, w, 0.0)
        mask = np.where(kept[:, None], mask, full)
    else:
        mask = full
    if weights is not None:
        w = np.asarray(weights, float)
    return dict(
        X=prob.X,
        z=prob.Z,
        mask=mask,
        lab=prob.tokens == prob.labels[:, None],
        y=prob.labels,
        E=prob.E,
        w=w,
    )


def default_init(prob: NTPProblem, *, seed: int = 0, index: int = 0) -> np.ndarray:
    """PyTorch's `nn.Linear` default, entries U(−1/√d, 1/√d) (the authors' W_0), drawn by
    `numpy.random.default_rng([seed, index])`."""
    b = 1.0 / math.sqrt(prob.d)
    return np.random.default_rng([seed, index]).uniform(-b, b, (prob.d, prob.d))


def _settings(steps, lr, loss, head, optimizer, record_every):
    steps = check_int("steps", steps, 1, MAX_STEPS)
    record_every = check_record_every(record_every, steps)
    lr = check_float("lr", lr, 0.0, 1e3, lo_open=True)
    check_choice("loss", loss, LOSSES)
    check_choice("head", head, HEADS)
    check_choice("optimizer", optimizer, OPTIMIZERS)
    return dict(
        steps=steps, lr=lr, loss=loss, head=head, optimizer=optimizer, record_every=record_every
    )


def run_batch(datas: list[dict], inits, **cfg) -> NTPTrajectory:
    """GD on a batch of prepared data dicts (equal shapes) from `inits` (B, d, d), in the
    attention GD engine (`engine.simulate`) with this model's gradient (`value_and_grad`)
    and the rule "ngd" (ε₀ = `NORM_EPS`) or "gd"."""
    stacked = NTPData(
        **{k: jnp.asarray(np.stack([dd[k] for dd in datas])) for k in NTPData._fields}
    )
    W0 = jnp.asarray(np.stack([np.asarray(a, float) for a in inits]))
    hyper = Hyper(lr=jnp.asarray(cfg["lr"], jnp.float64), eps=jnp.asarray(NORM_EPS))
    recs, _, _ = engine.simulate(
        W0,
        stacked,
        hyper,
        jnp.zeros(()),
        jnp.asarray(cfg["record_every"], jnp.int64),
        rule=RULES[cfg["optimizer"]],
        param="W",
        head=cfg["head"],
        loss=cfg["loss"],
        centred=False,
        n_records=cfg["steps"] // cfg["record_every"],
        value_and_grad=value_and_grad,
    )
    # the engine's records are record-major (k, B, ...)
    W, S, L, G = (np.moveaxis(np.asarray(a), 0, 1) for a in recs)
    return NTPTrajectory(
        W=W,
        probs=S,
        loss=L,
        grad_norm=G,
        steps=np.arange(0, cfg["steps"] + 1, cfg["record_every"]),
        settings=dict(cfg),
    )


def _check_probs(probs) -> list:
    probs = [probs] if isinstance(probs, NTPProblem) else list(probs)
    if not probs or not all(isinstance(p, NTPProblem) for p in probs):
        raise ValueError("`prob` must be an NTPProblem or a non-empty list of them")
    if len({p.shape for p in probs}) > 1:
        raise ValueError(
            f"`prob` must share one shape (n, T, K, d); got {sorted({p.shape for p in probs})}"
        )
    return probs


def _check_inits(init, probs, seed):
    if init is None:
        return [default_init(p, seed=seed, index=b) for b, p in enumerate(probs)]
    init = list(init) if isinstance(init, (list, tuple)) or np.ndim(init) == 3 else [init]
    if len(init) != len(probs):
        raise ValueError(f"`init` must hold {len(probs)} matrices; got {len(init)}")
    d = probs[0].d
    out = []
    for a in init:
        a = np.asarray(a, float)
        if a.shape != (d, d) or not np.all(np.isfinite(a)):
            raise ValueError(f"`init` must be finite ({d}, {d}) matrices; got shape {a.shape}")
        out.append(a)
    return out


def train(
    prob,
    steps: int = 4000,
    lr: float = 0.01,
    *,
    init=None,
    loss: str = "nll",
    head: str = "iden",
    optimizer: str = "ngd",
    record_every: int = 1,
    seed: int = 0,
) -> NTPTrajectory:
    """GD on one NTPProblem (a single trajectory) or on a list of equal-shape problems (a
    batched one, indexable by run). Defaults: the authors' global experiment (NGD, lr 0.01,
    4000 steps, NLL, identity head). `init`: W_0 (or a list); default `default_init`."""
    single = isinstance(prob, NTPProblem)
    probs = _check_probs(prob)
    cfg = _settings(steps, lr, loss, head, optimizer, record_every)
    seed = check_int("seed", seed, 0, 2**63 - 1)
    inits = _check_inits(init, probs, seed)
    tr = run_batch([problem_data(p) for p in probs], inits, **cfg)
    return tr[0] if single else tr


def solve_wfin(
    prob,
    steps: int = 4000,
    lr: float = 0.01,
    *,
    loss: str = "nll",
    head: str = "iden",
    optimizer: str = "ngd",
    record_every: int | None = None,
    scc=None,
    anchors=None,
) -> NTPTrajectory:
    """W^fin ("soft composition"): the same GD from W = 0 on the reduced data — each
    sequence cut to the tokens of its label's SCC, sequences without another such token
    dropped, the loss still divided by the full n (the authors' `train_Wfin`). Every
    gradient lies in the cyclic subspace S_fin, so W^fin ∈ S_fin. `scc`: SCC ids to reduce
    by (default the data's; the local graph's for the local W^fin) and `anchors` whose
    SCC to keep (default the labels; see `reduced_mask`)."""
    single = isinstance(prob, NTPProblem)
    probs = _check_probs(prob)
    cfg = _settings(steps, lr, loss, head, optimizer, record_every or steps)
    datas = [
        problem_data(p, reduced_mask(p, scc_ids(p) if scc is None else scc, anchors)) for p in probs
    ]
    d = probs[0].d
    tr = run_batch(datas, [np.zeros((d, d))] * len(probs), **cfg)
    return tr[0] if single else tr


def fit_R(W, W_fin, W_svm) -> float | np.ndarray:
    """R = argmin_R ‖W^fin + R·W^svm − W‖_F = ⟨W − W^fin, W^svm⟩ / ‖W^svm‖_F² (closed form
    of the authors' 1-D least squares `R_solver`; W^svm unnormalized). W may be a stack.
    NaN when W^svm = 0 (a fully cyclic graph has no direction)."""
    W, W_fin, W_svm = (np.asarray(a, float) for a in (W, W_fin, W_svm))
    nn = float(np.sum(W_svm * W_svm))
    if nn == 0:
        return np.full(W.shape[:-2], np.nan) if W.ndim > 2 else float("nan")
    r = np.einsum("...ab,ab->...", W - W_fin, W_svm) / nn
    return float(r) if np.ndim(r) == 0 else r


def decomposition(prob: NTPProblem, W, W_fin, W_svm, scc=None, anchors=None) -> dict:
    """The measures of arXiv 2403.08081's experiments for W (…, d, d) (a trajectory or one
    matrix), W_fin (same shape, or one matrix), W_svm (d, d):

    corr_svm = cos(W, W^svm); R = fit_R(W, W^fin_final, W^svm);
    corr_fit = cos(W, W^fin_final + R_final·W^svm); corr_perp = cos(W^svm, W − Π_S W);
    wfin_gap = ‖Π_S W − W^fin‖_F (S the cyclic subspace)."""
    from ..metrics import correlation

    W = np.asarray(W, float)
    W_fin = np.asarray(W_fin, float)
    fin_final = W_fin if W_fin.ndim == 2 else W_fin[-1]
    basis = cyclic_basis(prob, scc, anchors)
    PW = project(basis, W)
    R = fit_R(W, fin_final, W_svm)
    R_last = R if np.ndim(R) == 0 else R[-1]
    has_svm = np.any(W_svm != 0)
    nan = np.full(W.shape[:-2], np.nan) if W.ndim > 2 else float("nan")
    return dict(
        corr_svm=correlation(W, W_svm) if has_svm else nan,
        # a fully cyclic graph has W^svm = 0: then the model is W^fin alone
        corr_fit=correlation(W, fin_final + (R_last * W_svm if has_svm else 0.0))
        if has_svm or np.any(fin_final)
        else nan,
        corr_perp=correlation(W - PW, W_svm) if has_svm else nan,
        wfin_gap=np.linalg.norm(PW - W_fin, axis=(-2, -1)),
        R=R,
    )


def curves(prob: NTPProblem, tr, fin, W_svm, *, scc=None, anchors=None):
    """Per recorded step (a pandas DataFrame): loss, the decomposition measures
    (`decomposition`), R(τ) = ⟨W(τ), W^svm⟩/‖W^svm‖² and the mean attention mass on the
    top SCC."""
    import pandas as pd

    dec = decomposition(prob, tr.W, fin.W, W_svm, scc, anchors)
    return pd.DataFrame(
        dict(
            step=tr.steps,
            loss=tr.loss,
            corr_svm=dec["corr_svm"],
            corr_fit=dec["corr_fit"],
            corr_perp=dec["corr_perp"],
            wfin_gap=dec["wfin_gap"],
            R=dec["R"],
            top_mass=top_scc_mass(prob, tr.probs, scc, anchors).mean(-1),
        )
    )


def loss_floor(prob: NTPProblem, scc=None) -> float:
    """inf_W L(W) for the identity head and NLL, by a convex solve (Clarabel, exponential
    cones) of the reduced problem: (1/n) Σ_kept [log Σ_{t ∈ red_i} e^{a_it} − a_{i,y_i}].
    The hard-retrieval part costs nothing in the limit R → ∞, so this is the loss floor
    that GD (and W^fin) approach. 0 when no sequence keeps a reduced sample."""
    import cvxpy as cp

    mask = reduced_mask(prob, scc_ids(prob) if scc is None else scc)
    kept = np.flatnonzero(mask.any(1))
    if len(kept) == 0:
        return 0.0
    d = prob.d
    W = cp.Variable((d, d))
    terms = []
    for i in kept:
        X = prob.X[i][mask[i]]  # (m, d)
        a = X @ W @ prob.Z[i]
        pos = int(np.flatnonzero(prob.tokens[i][mask[i]] == prob.labels[i])[0])
        terms.append(cp.log_sum_exp(a) - a[pos])
    problem = cp.Problem(cp.Minimize(cp.sum(cp.hstack(terms)) / prob.n))
    problem.solve(solver=cp.CLARABEL)
    # (an inaccurate status is accepted: the floor may be an infimum that is not attained
    # when the embeddings are dependent; only the objective value is read)
    if problem.status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE):
        raise ValueError(f"`prob` must give a solvable loss floor; got status {problem.status}")
    return float(problem.value)
