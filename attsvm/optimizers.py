"""Optimizer update rules as pure JAX functions, the centred softmax gradient and the loss
infimum L* (docs/followups.md §2, §4, §4b, §5). They run in the GD engine
(`engine.simulate`, through `attsvm.train(optimizer=…)`), the one GD driver.

Every rule maps (params, g = ∇L(params)) to new params; for (K, Q) each factor is one leaf:

    "gd"        W ← W − η g
    "ngd"       W ← W − η g / (‖g‖_F + ε)                 per leaf (as the engine, train.py)
    "polyak"    W ← W − η_k g,  η_k = min(η (L(W) − L*) / ‖g‖², cap, max_step / ‖g‖)
                (arXiv 2402.05738; ‖g‖ over all leaves: the Polyak step of the whole
                parameter vector; max_step bounds the step length ‖η_k g‖)
    "md"        U ← U − η g,             W = ∇ψ⁻¹(U)     ℓp mirror descent (arXiv 2410.14581)
    "nmd"       U ← U − η g / (‖g‖_q + ε), W = ∇ψ⁻¹(U)   its normalized variant (q = p/(p−1))
    "sign"      W ← W − η sign(g)                         normalized steepest descent in ℓ∞
    "spectral"  W ← W − η U_r V_rᵀ,  g = U Σ Vᵀ          normalized steepest descent in σ_max

with the entrywise potential ψ(W) = ‖W‖_p^p / p, ∇ψ(W) = sign(W) ⊙ |W|^{p−1} and
∇ψ⁻¹(U) = sign(U) ⊙ |U|^{1/(p−1)} (docs/followups.md §2.1). The dual variable U is *accumulated*
(U_0 = ∇ψ(W_0), then only gradient steps), not recomputed from W as the authors' `SMD` code
does: the same iterates in exact arithmetic, but the round trip |W|^{p−1} loses the small
entries for p near 1 (docs/followups.md §2.5 pitfall 2). At p = 2 both maps are the identity and
"md"/"nmd" are "gd"/"ngd". U_r V_rᵀ keeps only singular values above σ_max·max(shape)·2⁻⁵²
(the gradient of attention has rank ≤ n; the null directions of an SVD are arbitrary).
ε = 0 normalizes exactly (a gradient whose norm is 0 or below the smallest normal float,
2.2e-308, gives a zero step: the run has reached float64's floor); the authors' code adds
ε = 2⁻⁵² (docs/theory.md), which stalls the iterates once ‖g‖ ≈ ε (docs/followups.md §4b;
with the plain gradient they then drift slowly away: docs/optimizer_bias_demo.py).
Norms are computed scaled by max|g| so that gradients of 1e-300 still normalize (‖g‖² would
underflow).

State and hyperparameters are NamedTuples: `OptState(dual, count)` (dual = U for md/nmd,
filled in by the first update so that `init(params)` needs no p; empty for the other rules) and
`Hyper(lr, p, eps, cap, gap, max_step)`, all traced (a new step size or p never recompiles);
`gap` = L(W_k) − L* is set by the caller before each Polyak update.

Centred gradient (docs/followups.md §4b): the representation r_ik = Σ_t s_ikt x_it is written as
x_iρ + Σ_t s_ikt (x_it − x_iρ) with ρ = argmax_t of the logits (an integer: no gradient flows
through the choice). It is the same number, but the softmax backward s ⊙ (c − ⟨s, c⟩) now sees
c_ρ = 0 exactly, so no term of size 1 cancels: the logit gradient is −s_ρ⟨s, c⟩ at ρ and
s_t (c_t − ⟨s, c⟩) elsewhere, each accurate to rounding however small, for every head. The
plain form loses the selected token's term once 1 − s_ρ < 2⁻⁵³ (logit gaps ≳ 37) and the
gradient direction is then wrong (not zero) until the other weights underflow (gaps ≳ 745).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from . import model
from .model import Data, jax, jnp
from .problems import Problem, check_choice, token_scores

OPTIMIZERS = ("gd", "ngd", "polyak", "md", "nmd", "sign", "spectral")
KQ_OPTIMIZERS = ("gd", "ngd", "polyak", "sign")
PARAMS = ("W", "KQ")
NORM_EPS = 2.0**-52  # the authors' ε of the normalized step
# The gradient every run uses unless told otherwise (the one definition of the defaults):
# exact, centred gradients and, for the linear head, the exact normalizer (docs/followups.md
# §4b). Nonlinear heads keep the authors' ε: their W(k) has a finite part W^fin, and an exact
# normalized step of constant length never settles in it (measured on the Nonlinear heads
# page's default, relu, n=3, T=4, d=4, seed 8, 2000 steps: 1 − corr with W^fin + R·W^dir
# 0.228 with ε = 0, 0.0026 with ε = 2⁻⁵², where the step shrinks once ‖∇L‖ ≲ 1e-16).
# The authors' loop (plain autodiff, ‖∇L‖ + 2⁻⁵²) is an option, for reproducing figures.
DEFAULT_EPS = {"linear": 0.0, "relu": NORM_EPS, "quadratic": NORM_EPS}
DEFAULT_CENTRED = True
AUTHORS_GRADIENT = {"centred": False, "eps": NORM_EPS}
MIN_P, MAX_P = 1.01, 100.0  # MD exponents: p → 1 raises |U| to 1/(p − 1) (overflow)
RIDGE_EPS = float(np.finfo(np.float64).eps)
TINY = float(np.finfo(np.float64).tiny)  # 2.2e-308: below it a norm counts as 0 (no step)


class Hyper(NamedTuple):
    """Traced hyperparameters. lr: η; p: mirror exponent (md/nmd); eps: ε of the normalizer
    (ngd/nmd); cap: upper bound on the Polyak step size η_k; gap: L(W_k) − L* (polyak);
    max_step: upper bound on the Polyak step length η_k ‖g‖."""

    lr: Any
    p: Any = 2.0
    eps: Any = 0.0
    cap: Any = math.inf
    gap: Any = 0.0
    max_step: Any = math.inf


class OptState(NamedTuple):
    """dual: U = ∇ψ(W) accumulated (md/nmd; a copy of params until the first update);
    count: updates done."""

    dual: Any
    count: Any


class Optimizer(NamedTuple):
    init: Callable  # params -> OptState
    update: Callable  # (grads, state, params, hyper) -> (new_params, new_state)


_tmap = jax.tree_util.tree_map
_leaves = jax.tree_util.tree_leaves


def _norm(a, q=2.0):
    """‖a‖_q of all entries, scaled by max|a| (no underflow of |a|^q); 0 when every entry is
    0 or subnormal (XLA's CPU backend may flush subnormals to zero in some operations and
    not in others: dividing by one gives inf)."""
    m = jnp.max(jnp.abs(a))
    ok = m > TINY
    safe = jnp.where(ok, m, 1.0)
    u = a / safe
    if isinstance(q, (int, float)) and q == 2.0:  # no general pow on the hot path
        return jnp.where(ok, m * jnp.sqrt(jnp.sum(u * u)), 0.0)
    return jnp.where(ok, m * jnp.sum(jnp.abs(u) ** q) ** (1.0 / q), 0.0)


def _tree_norm(tree):
    """‖·‖_F of a whole pytree, scaled."""
    ns = jnp.stack([_norm(a) for a in _leaves(tree)])
    m = jnp.max(ns)
    ok = m > TINY
    safe = jnp.where(ok, m, 1.0)
    return jnp.where(ok, m * jnp.sqrt(jnp.sum((ns / safe) ** 2)), 0.0)


def _safe_div(a, b):
    """a / b, and 0 where b ≤ TINY (a zero — or underflowed — gradient takes no step)."""
    ok = b > TINY
    return jnp.where(ok, a / jnp.where(ok, b, 1.0), 0.0)


def mirror_map(W, p):
    """∇ψ(W) = sign(W) ⊙ |W|^{p−1} for ψ = ‖W‖_p^p / p (entrywise)."""
    return jnp.sign(W) * jnp.abs(W) ** (p - 1.0)


def inverse_mirror_map(U, p):
    """(∇ψ)⁻¹(U) = sign(U) ⊙ |U|^{1/(p−1)}."""
    return jnp.sign(U) * jnp.abs(U) ** (1.0 / (p - 1.0))


def orthogonalize(G):
    """U_r V_rᵀ from the SVD of G (d, m), over singular values > σ_max·max(d, m)·2⁻⁵²."""
    U, s, Vt = jnp.linalg.svd(G, full_matrices=False)
    keep = s > s[0] * max(G.shape) * 2.0**-52
    return (U * keep[None, :].astype(G.dtype)) @ Vt


def make_optimizer(name: str) -> Optimizer:
    """The update rule `name` (one of `OPTIMIZERS`) as an (init, update) pair."""
    check_choice("optimizer", name, OPTIMIZERS)

    def init(params):
        # only md/nmd read the dual; the other rules carry none (a copy of params in the
        # engine's loop, copied again every step)
        dual = _tmap(jnp.asarray, params) if name in ("md", "nmd") else ()
        return OptState(dual=dual, count=jnp.zeros((), jnp.int32))

    def update(grads, state, params, hyper: Hyper):
        lr = hyper.lr
        dual = state.dual
        if name == "gd":
            new = _tmap(lambda w, g: w - lr * g, params, grads)
        elif name == "ngd":
            new = _tmap(lambda w, g: w - lr * _safe_div(g, _norm(g) + hyper.eps), params, grads)
        elif name == "polyak":
            # η_k g = min(η gap/‖g‖, cap ‖g‖) · g/‖g‖: the same step, but η_k itself
            # (≈ e^{margin}) would overflow once ‖g‖ ≲ 1e-154, and inf · 0 = NaN
            gn = _tree_norm(grads)
            ok = gn > TINY
            gs = jnp.where(ok, gn, 1.0)
            gap = jnp.maximum(hyper.gap, 0.0)
            length = jnp.where(
                ok, jnp.minimum(jnp.minimum(lr * gap / gs, hyper.cap * gs), hyper.max_step), 0.0
            )
            new = _tmap(lambda w, g: w - length * jnp.where(ok, g / gs, 0.0), params, grads)
        elif name in ("md", "nmd"):
            p = hyper.p
            q = p / (p - 1.0)
            U0 = _tmap(lambda w, u: jnp.where(state.count == 0, mirror_map(w, p), u), params, dual)
            if name == "md":
                dual = _tmap(lambda u, g: u - lr * g, U0, grads)
            else:
                dual = _tmap(lambda u, g: u - lr * _safe_div(g, _norm(g, q) + hyper.eps), U0, grads)
            new = _tmap(lambda u: inverse_mirror_map(u, p), dual)
        elif name == "sign":
            new = _tmap(lambda w, g: w - lr * jnp.sign(g), params, grads)
        else:  # spectral
            new = _tmap(lambda w, g: w - lr * orthogonalize(g), params, grads)
        return new, OptState(dual=dual, count=state.count + 1)

    return Optimizer(init=init, update=update)


# -- the centred objective (docs/followups.md §4b) --------------------------------------
def centred_outputs(W, data: Data, kind: str):
    """f: (n, K) and s: (n, K, T) as `model.outputs`, centred (cancellation-free gradient)."""
    return model.outputs(W, data, kind, centred=True)


def centred_risk(W, data: Data, head_kind: str, loss_kind: str):
    """L(W) computed through `centred_outputs`."""
    f, _ = centred_outputs(W, data, head_kind)
    return jnp.sum(data.w * model.loss_fn(data.Y * f, loss_kind))


def centred_objective(params, data: Data, ridge, *, param: str, head_kind: str, loss_kind: str):
    """`model.objective` with the centred representation: its autodiff gradient is the
    cancellation-free one."""
    return model.objective(
        params, data, ridge, param=param, head_kind=head_kind, loss_kind=loss_kind, centred=True
    )


def loss_gap(W, data: Data, loss_kind: str):
    """L(W) − L* for the linear head, accurate however small (no difference of two ≈ L*).

    With γ_ikt = Y_ik vᵀ x_it and γ*_ik = max_t γ_ikt: Y_ik f_ik = γ*_ik − δ_ik,
    δ_ik = Σ_t s_ikt (γ*_ik − γ_ikt) ≥ 0 (a sum of non-negative terms), and
    ℓ(γ* − δ) − ℓ(γ*) = log1p(expm1(δ) σ(−γ*)) (logistic), e^{−γ*} expm1(δ) (exponential),
    δ (correlation). γ* is the max of the very γ computed here, so γ* − γ_ikt is exactly 0 at
    the best token (a γ* computed elsewhere can differ by an ulp, ~1e-17, which would swamp a
    gap of 1e-300).
    """
    s = jax.nn.softmax(model.logits(W, data), axis=-1)  # (n, K, T)
    g = data.Y[:, :, None] * jnp.einsum("ntd,d->nt", data.X, data.v)[:, None, :]
    g = jnp.where(data.mask, g, -jnp.inf)  # (n, K, T)
    gamma_star = jnp.max(g, axis=-1)  # (n, K)
    gap_t = jnp.where(data.mask, gamma_star[:, :, None] - g, 0.0)
    delta = jnp.sum(s * gap_t, axis=-1)  # (n, K)
    if loss_kind == "logistic":
        per = jnp.log1p(jnp.expm1(delta) * jax.nn.sigmoid(-gamma_star))
    elif loss_kind == "exponential":
        per = jnp.exp(-gamma_star) * jnp.expm1(delta)
    else:
        per = delta
    return jnp.sum(data.w * per)


# -- problems as arrays, and L* ------------------------------------------------------------------
def problem_data(prob: Problem) -> Data:
    """The arrays of `prob` (unpadded) as `model.Data`."""
    Qv, Yl, mask = prob.query_view()
    n = prob.n
    K = Qv.shape[1]
    return Data(
        X=jnp.asarray(prob.X),
        Q=jnp.asarray(Qv),
        Y=jnp.asarray(Yl),
        mask=jnp.asarray(prob.token_mask()),
        w=jnp.full((n, K), 1.0 / n),
        v=jnp.asarray(prob.v if prob.v is not None else np.zeros(prob.d)),
        V=jnp.asarray(prob.V if prob.V is not None else np.zeros((prob.d, prob.d))),
        lam=jnp.asarray(prob.lam),
    )


def loss_infimum(prob: Problem, loss: str = "logistic", *, check_feasible: bool = True) -> float:
    """L* = inf_W L(W) for the linear head with its fixed v: (1/n) Σ_ik ℓ(γ*_ik), γ*_ik the
    best token score (docs/followups.md §4.1 [DER]).

    f_ik = Y_ik vᵀ X_iᵀ s_ik is a convex combination of the token scores, so ℓ(Y f) ≥ ℓ(γ*)
    for a decreasing ℓ; the bound is approached (never attained) along W = R·W^mm as R → ∞
    iff the Att-SVM at the optimal tokens is feasible, which `check_feasible` verifies (else
    the bound is only a lower bound and ValueError is raised). Not 0: Polyak with L* = 0 would
    take unbounded steps (docs/followups.md §4.4).
    """
    if not isinstance(prob, Problem):
        raise ValueError(f"`prob` must be an attsvm.Problem; got {type(prob).__name__}")
    check_choice("loss", loss, model.LOSSES)
    if prob.head != "linear":
        raise ValueError(
            f"`prob` must have the linear head for a closed-form L*; got head={prob.head!r}"
        )
    if check_feasible:
        from .svm import solve_att_svm

        if not solve_att_svm(prob).feasible:
            raise ValueError(
                "`prob` must have a feasible Att-SVM at its optimal tokens for "
                "(1/n) Σ ℓ(γ*) to be the infimum; got an infeasible one"
            )
    g = token_scores(prob)
    best = g.max(axis=-1)
    u = jnp.asarray(best)
    return float(jnp.sum(model.loss_fn(u, loss)) / prob.n)
