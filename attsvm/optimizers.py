"""Optimizer update rules as pure JAX functions, the centred softmax gradient, and a small
jitted driver (issue 11; docs/followups.md §2, §4, §4b, §5).

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
filled in by the first update so that `init(params)` needs no p) and
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
from dataclasses import dataclass
from functools import partial
from typing import Any, NamedTuple

import numpy as np

from . import model
from .model import Data, jax, jnp
from .problems import Problem, check_choice, check_float, check_int, token_scores

OPTIMIZERS = ("gd", "ngd", "polyak", "md", "nmd", "sign", "spectral")
KQ_OPTIMIZERS = ("gd", "ngd", "polyak", "sign")
PARAMS = ("W", "KQ")
NORM_EPS = 2.0 ** -52            # the authors' ε of the normalized step
# The gradient every run uses unless told otherwise (the one definition of the defaults):
# exact, centred gradients and the exact normalizer (docs/followups.md §4b). The authors'
# loop (plain autodiff, ‖∇L‖ + 2⁻⁵²) is an option, for reproducing their figures.
DEFAULT_EPS = 0.0
DEFAULT_CENTRED = True
AUTHORS_GRADIENT = {"centred": False, "eps": NORM_EPS}
MIN_P, MAX_P = 1.01, 100.0       # MD exponents: p → 1 raises |U| to 1/(p − 1) (overflow)
RIDGE_EPS = float(np.finfo(np.float64).eps)
TINY = float(np.finfo(np.float64).tiny)   # 2.2e-308: below it a norm counts as 0 (no step)


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
    init: Callable      # params -> OptState
    update: Callable    # (grads, state, params, hyper) -> (new_params, new_state)


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
    if isinstance(q, (int, float)) and q == 2.0:     # no general pow on the hot path
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
    keep = s > s[0] * max(G.shape) * 2.0 ** -52
    return (U * keep[None, :].astype(G.dtype)) @ Vt


def make_optimizer(name: str) -> Optimizer:
    """The update rule `name` (one of `OPTIMIZERS`) as an (init, update) pair."""
    check_choice("optimizer", name, OPTIMIZERS)

    def init(params):
        return OptState(dual=_tmap(jnp.asarray, params), count=jnp.zeros((), jnp.int32))

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
            length = jnp.where(ok, jnp.minimum(jnp.minimum(lr * gap / gs, hyper.cap * gs),
                                               hyper.max_step), 0.0)
            new = _tmap(lambda w, g: w - length * jnp.where(ok, g / gs, 0.0), params, grads)
        elif name in ("md", "nmd"):
            p = hyper.p
            q = p / (p - 1.0)
            U0 = _tmap(lambda w, u: jnp.where(state.count == 0, mirror_map(w, p), u),
                       params, dual)
            if name == "md":
                dual = _tmap(lambda u, g: u - lr * g, U0, grads)
            else:
                dual = _tmap(lambda u, g: u - lr * _safe_div(g, _norm(g, q) + hyper.eps),
                             U0, grads)
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


def centred_objective(params, data: Data, ridge, *, param: str, head_kind: str,
                      loss_kind: str):
    """`model.objective` with the centred representation: its autodiff gradient is the
    cancellation-free one."""
    return model.objective(params, data, ridge, param=param, head_kind=head_kind,
                           loss_kind=loss_kind, centred=True)


def loss_gap(W, data: Data, loss_kind: str):
    """L(W) − L* for the linear head, accurate however small (no difference of two ≈ L*).

    With γ_ikt = Y_ik vᵀ x_it and γ*_ik = max_t γ_ikt: Y_ik f_ik = γ*_ik − δ_ik,
    δ_ik = Σ_t s_ikt (γ*_ik − γ_ikt) ≥ 0 (a sum of non-negative terms), and
    ℓ(γ* − δ) − ℓ(γ*) = log1p(expm1(δ) σ(−γ*)) (logistic), e^{−γ*} expm1(δ) (exponential),
    δ (correlation). γ* is the max of the very γ computed here, so γ* − γ_ikt is exactly 0 at
    the best token (a γ* computed elsewhere can differ by an ulp, ~1e-17, which would swamp a
    gap of 1e-300).
    """
    s = jax.nn.softmax(model.logits(W, data), axis=-1)          # (n, K, T)
    g = data.Y[:, :, None] * jnp.einsum("ntd,d->nt", data.X, data.v)[:, None, :]
    g = jnp.where(data.mask, g, -jnp.inf)                       # (n, K, T)
    gamma_star = jnp.max(g, axis=-1)                            # (n, K)
    gap_t = jnp.where(data.mask, gamma_star[:, :, None] - g, 0.0)
    delta = jnp.sum(s * gap_t, axis=-1)                         # (n, K)
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
    return Data(X=jnp.asarray(prob.X), Q=jnp.asarray(Qv), Y=jnp.asarray(Yl),
                mask=jnp.asarray(np.broadcast_to(mask[None], (n, K, prob.T))),
                w=jnp.full((n, K), 1.0 / n),
                v=jnp.asarray(prob.v if prob.v is not None else np.zeros(prob.d)),
                V=jnp.asarray(prob.V if prob.V is not None else np.zeros((prob.d, prob.d))),
                lam=jnp.asarray(prob.lam))


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
        raise ValueError(f"`prob` must have the linear head for a closed-form L*; "
                         f"got head={prob.head!r}")
    if check_feasible:
        from .svm import solve_att_svm
        if not solve_att_svm(prob).feasible:
            raise ValueError("`prob` must have a feasible Att-SVM at its optimal tokens for "
                             "(1/n) Σ ℓ(γ*) to be the infimum; got an infeasible one")
    g = token_scores(prob)
    best = g.max(axis=-1)
    u = jnp.asarray(best)
    return float(jnp.sum(model.loss_fn(u, loss)) / prob.n)


# -- the driver --------------------------------------------------------------------------------
@partial(jax.jit, static_argnames=("param", "head", "loss", "centred", "n_records"))
def _run(params0, data: Data, which, hyper: Hyper, ridge, record_every, *, param,
         head, loss, centred, n_records):
    """The scan of records of a loop of steps. The rule is traced too (`which` indexes
    OPTIMIZERS through `lax.switch`; only the chosen branch runs): one program per
    (param, head, loss, centred, n_records) serves every optimizer."""
    rules = [make_optimizer(name) for name in OPTIMIZERS]
    objective = centred_objective if centred else model.objective
    grad = jax.grad(lambda prm: objective(prm, data, ridge, param=param, head_kind=head,
                                          loss_kind=loss))
    gap_fn = (lambda W: loss_gap(W, data, loss)) if head == "linear" else \
        (lambda W: jnp.zeros(()))
    polyak = OPTIMIZERS.index("polyak")

    def step(carry):
        params, state = carry
        g = grad(params)
        gap = jax.lax.cond(which == polyak, lambda: gap_fn(model.as_W(params, param)),
                           lambda: jnp.zeros(()))
        h = hyper._replace(gap=gap)
        return jax.lax.switch(which, [r.update for r in rules], g, state, params, h)

    def record(params):
        W = model.as_W(params, param)
        return W, model.risk(W, data, head, loss), gap_fn(W)

    def chunk(carry, _):
        rec = record(carry[0])
        carry = jax.lax.fori_loop(0, record_every, lambda _, c: step(c), carry)
        return carry, rec

    carry, recs = jax.lax.scan(chunk, (params0, rules[0].init(params0)), None, length=n_records)
    last = record(carry[0])
    recs = _tmap(lambda a, b: jnp.concatenate([a, b[None]]), recs, last)
    return recs, carry[0]


@dataclass(frozen=True, eq=False)
class OptimizerRun:
    """Records after steps 0, r, 2r, …, `steps`.

    Attributes:
        W: (k, d, d) the combined matrix. loss: (k,) L(W) (plain form, no ridge).
        gap: (k,) L(W) − L* computed cancellation-free (linear head; zeros otherwise).
        steps: (k,) step numbers. final_params: W or (K, Q) after the last step.
        settings: the call's settings.
    """

    W: np.ndarray
    loss: np.ndarray
    gap: np.ndarray
    steps: np.ndarray
    final_params: Any
    settings: dict


def run_optimizer(prob: Problem, *, optimizer: str, steps: int, lr: float,
                  p: float | None = None, param: str = "W", loss: str = "logistic",
                  init=None, eps: float = 0.0, cap: float = math.inf,
                  max_step: float | None = None, centred: bool = True,
                  ridge: float | None = None, record_every: int | None = None) -> OptimizerRun:
    """Run one update rule for `steps` steps on `prob` (one jitted `lax.scan`).

    Args:
        prob: the problem. optimizer: one of `OPTIMIZERS` (param="KQ": `KQ_OPTIMIZERS`).
        steps: number of updates. lr: η > 0 (for "polyak" the factor in front of the Polyak
            step). p: the mirror exponent of "md"/"nmd", MIN_P ≤ p ≤ MAX_P; None otherwise.
        param: "W" or "KQ". loss: one of model.LOSSES.
        init: W (d, d) or (K, Q); None: W = 0 (the start of the MD/FastRates runs, docs/followups.md
            §2.6, §4.3), or the engine's `default_init` for (K, Q) (0 is a saddle there).
        eps: ε ≥ 0 added to the normalizer of "ngd"/"nmd" (2⁻⁵² = the authors' code).
        cap: upper bound on the Polyak step size η_k (default: none; η_k ≈ e^{margin} grows
            legitimately as the loss saturates, while the step length η_k‖g‖ stays O(η)).
        max_step: upper bound on the Polyak step length ‖η_k g‖_F; default 10·lr. The
            objective is not convex: where L − L* is large and ‖g‖ small (a plateau) the
            uncapped step jumps into a saturated wrong selection and stays there (4 of 10
            random_problem(6, 8, 10) seeds at lr = 1, ‖W‖ up to 1e94; none with 10·lr).
            "polyak" uses L − L* from `loss_gap` (L* = `loss_infimum(prob, loss)`; linear
            head only; the risk's gap: a (K, Q) ridge is not included).
        centred: differentiate the centred objective (docs/followups.md §4b); False: plain
            autodiff.
        ridge: the (K, Q) ridge ε (default 2⁻⁵², as the engine). record_every: record
            stride (default: 1; must divide `steps`).

    Long because it validates every option at the public boundary, before jit.
    """
    if not isinstance(prob, Problem):
        raise ValueError(f"`prob` must be an attsvm.Problem; got {type(prob).__name__}")
    check_choice("param", param, PARAMS)
    check_choice("optimizer", optimizer, OPTIMIZERS if param == "W" else KQ_OPTIMIZERS)
    check_choice("loss", loss, model.LOSSES)
    steps = check_int("steps", steps, 1, 10_000_000)
    lr = check_float("lr", lr, 0.0, 1e6, lo_open=True)
    eps = check_float("eps", eps, 0.0, 1.0)
    if not (isinstance(cap, (int, float)) and cap > 0):
        raise ValueError(f"`cap` must be a number > 0 (math.inf for none); got {cap!r}")
    max_step = 10.0 * lr if max_step is None else max_step
    if not (isinstance(max_step, (int, float)) and max_step > 0):
        raise ValueError(f"`max_step` must be a number > 0 (math.inf for none); "
                         f"got {max_step!r}")
    if optimizer in ("md", "nmd"):
        if p is None:
            raise ValueError(f"`p` must be given for optimizer={optimizer!r} "
                             f"(a number in [{MIN_P}, {MAX_P}]); got None")
        p = check_float("p", p, MIN_P, MAX_P)
    elif p is not None:
        raise ValueError(f"`p` must be None unless optimizer is 'md' or 'nmd'; got p={p!r}")
    if not isinstance(centred, (bool, np.bool_)):
        raise ValueError(f"`centred` must be True or False; got {centred!r}")
    record_every = 1 if record_every is None else record_every
    record_every = check_int("record_every", record_every, 1, steps)
    if steps % record_every:
        raise ValueError(f"`record_every` must divide `steps` ({steps}); got {record_every}")
    ridge = RIDGE_EPS if ridge is None else check_float("ridge", ridge, 0.0, 1.0)
    data = problem_data(prob)
    if optimizer == "polyak":
        # L* must be the infimum (linear head, feasible Att-SVM at opt); the run itself uses
        # L − L* from `loss_gap`, which never forms the difference of two ≈ L* numbers
        loss_infimum(prob, loss)
    if init is None:
        if param == "W":
            init = np.zeros((prob.d, prob.d))
        else:
            from . import default_init
            init = default_init(prob, "KQ")
    if param == "W":
        params0 = np.asarray(init, dtype=np.float64)
        if params0.shape != (prob.d, prob.d) or not np.all(np.isfinite(params0)):
            raise ValueError(f"`init` must be a finite ({prob.d}, {prob.d}) array; "
                             f"got shape {params0.shape}")
        params0 = jnp.asarray(params0)
    else:
        if not isinstance(init, (tuple, list)) or len(init) != 2:
            raise ValueError(f"`init` must be a pair (K, Q) for param='KQ'; got "
                             f"{type(init).__name__}")
        params0 = tuple(jnp.asarray(np.asarray(a, dtype=np.float64)) for a in init)
        if any(a.ndim != 2 or a.shape[0] != prob.d or a.shape != params0[0].shape
               for a in params0):
            raise ValueError(f"`init` must be a pair of (d, m) arrays with d = {prob.d}; got "
                             f"shapes {[a.shape for a in params0]}")
    hyper = Hyper(lr=jnp.asarray(lr), p=jnp.asarray(2.0 if p is None else p),
                  eps=jnp.asarray(eps), cap=jnp.asarray(float(cap)), gap=jnp.asarray(0.0),
                  max_step=jnp.asarray(float(max_step)))
    n_records = steps // record_every
    (W, L, gap), final = _run(params0, data, jnp.asarray(OPTIMIZERS.index(optimizer)), hyper,
                              jnp.asarray(ridge), jnp.asarray(record_every), param=param,
                              head=prob.head, loss=loss, centred=bool(centred),
                              n_records=n_records)
    final = np.asarray(final) if param == "W" else tuple(np.asarray(a) for a in final)
    return OptimizerRun(W=np.asarray(W), loss=np.asarray(L), gap=np.asarray(gap),
                        steps=np.arange(n_records + 1) * record_every, final_params=final,
                        settings=dict(optimizer=optimizer, steps=steps, lr=lr, p=p, param=param,
                                      loss=loss, eps=eps, cap=cap, max_step=max_step,
                                      centred=bool(centred),
                                      ridge=ridge, record_every=record_every))


def run_batch(probs, *, optimizer: str, steps: int, lrs, ps=None, loss: str = "logistic",
              eps: float = 0.0, max_step=None, centred: bool = True,
              record_every: int | None = None) -> OptimizerRun:
    """`run_optimizer` on W from W_0 = 0 for a batch of problems of one shape, one jitted
    program (`jax.vmap` over the problems and the per-run lr, p).

    Args:
        probs: B problems with equal n, T, d, head and query mode.
        optimizer: one rule of `OPTIMIZERS` for the whole batch (a batched rule index would
            make `lax.switch` run every rule). lrs: (B,) step sizes or one number.
        ps: (B,) mirror exponents or one number ("md"/"nmd" only). max_step: Polyak step
            length bound, (B,) or one number; default 10·lr.
        Others as `run_optimizer`.

    Returns:
        OptimizerRun whose W, loss, gap have a leading batch axis (B, k, …); final_params
        (B, d, d).

    Long because it validates the batch (shapes, per-run lr and p) before jit.
    """
    probs = list(probs)
    if not probs or not all(isinstance(p, Problem) for p in probs):
        raise ValueError("`probs` must be a non-empty list of attsvm.Problem")
    shapes = {(p.n, p.T, p.d, p.head, p.queries) for p in probs}
    if len(shapes) != 1:
        raise ValueError(f"`probs` must share n, T, d, head and queries; got {sorted(shapes)}")
    B = len(probs)
    lrs = np.broadcast_to(np.asarray(lrs, dtype=np.float64), (B,))
    for lr in lrs:
        check_float("lr", float(lr), 0.0, 1e6, lo_open=True)
    # validate everything else once, through the single-run front door (steps=1 is cheap)
    p0 = None if ps is None else float(np.broadcast_to(np.asarray(ps, float), (B,))[0])
    run_optimizer(probs[0], optimizer=optimizer, steps=1, lr=float(lrs[0]), p=p0, loss=loss,
                  eps=eps, centred=centred)
    pv = np.full(B, 2.0) if ps is None else np.broadcast_to(np.asarray(ps, float), (B,))
    if ps is not None:
        for p in pv:
            check_float("p", float(p), MIN_P, MAX_P)
    steps = check_int("steps", steps, 1, 10_000_000)
    record_every = check_int("record_every", 1 if record_every is None else record_every, 1,
                             steps)
    if steps % record_every:
        raise ValueError(f"`record_every` must divide `steps` ({steps}); got {record_every}")
    ms = 10.0 * lrs if max_step is None else np.broadcast_to(np.asarray(max_step, float), (B,))
    if optimizer == "polyak":
        for prob in probs[1:]:
            loss_infimum(prob, loss)
    datas = [problem_data(p) for p in probs]
    data = _tmap(lambda *a: jnp.stack(a), *datas)
    d = probs[0].d
    hyper = Hyper(lr=jnp.asarray(lrs), p=jnp.asarray(pv), eps=jnp.full(B, float(eps)),
                  cap=jnp.full(B, math.inf), gap=jnp.zeros(B), max_step=jnp.asarray(ms))
    fn = jax.vmap(partial(_run, param="W", head=probs[0].head, loss=loss,
                          centred=bool(centred), n_records=steps // record_every),
                  in_axes=(0, 0, None, 0, None, None))
    (W, L, gap), final = fn(jnp.zeros((B, d, d)), data,
                            jnp.asarray(OPTIMIZERS.index(optimizer)), hyper,
                            jnp.asarray(RIDGE_EPS), jnp.asarray(record_every))
    return OptimizerRun(W=np.asarray(W), loss=np.asarray(L), gap=np.asarray(gap),
                        steps=np.arange(steps // record_every + 1) * record_every,
                        final_params=np.asarray(final),
                        settings=dict(optimizer=optimizer, steps=steps, lrs=lrs.tolist(),
                                      ps=None if ps is None else pv.tolist(), loss=loss,
                                      eps=eps, centred=bool(centred),
                                      record_every=record_every))


def race(prob: Problem, runs, *, steps: int, records: int = 100) -> dict:
    """Several optimizers from the same start (W_0 = 0) on one problem, for the
    Optimizer → norm page.

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
        r = run_optimizer(prob, optimizer=opt, steps=steps, lr=lr, p=p, record_every=every)
        out[label] = (r.steps, r.W)
    return out
