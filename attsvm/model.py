"""One-layer softmax attention, its heads and losses, in pure JAX (float64).

    s_ik = softmax_t( x_itᵀ W z_ik )  over the tokens query k may attend to
                                             (arXiv 2308.16898 §2, eq. (1))
    r_ik = X_iᵀ s_ik,   f_ik = h(r_ik)
    L(W) = Σ_i Σ_k w_ik ℓ(Y_ik f_ik),   w_ik = 1/n for real (i, k), 0 for padding

With W = K Qᵀ for the (K, Q)-parameterization, whose objective adds the vanishing ridge
ε (‖K‖_F² + ‖Q‖_F²) (docs/theory.md §A.1). Everything here acts on one problem; `jax.vmap` batches.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

LOSSES = ("logistic", "exponential", "correlation")


class Data(NamedTuple):
    """Arrays of one (possibly padded) problem, as they cross `jit`."""

    X: jnp.ndarray  # (n, T, d) tokens
    Q: jnp.ndarray  # (n, K, d) queries z_ik
    Y: jnp.ndarray  # (n, K) labels
    mask: jnp.ndarray  # (n, K, T) bool: token t is attendable by query (i, k)
    w: jnp.ndarray  # (n, K) loss weights: 1/n for real queries, 0 for padding
    v: jnp.ndarray  # (d,) head vector (linear, quadratic)
    V: jnp.ndarray  # (d, d) relu head's first layer
    lam: jnp.ndarray  # () quadratic head's λ
    # the span form (`batching.span_basis`): W = W0 + Σ_j e_j V_j over an orthonormal basis
    # V of span{x_it z_ikᵀ}; GD then runs on e and the logits are a0 + Rᵀe
    R: jnp.ndarray | None = None  # (p, n·K·T) coordinates of the x_it z_ikᵀ in V
    a0: jnp.ndarray | None = None  # (n, K, T) the logits of W0
    # a stack of attention layers (`attsvm.hierarchy`): K = T, Q = X, mask (n, T, T) the
    # keys of query t, w (n, T) 1/n at the query token q of each sequence, 0 elsewhere
    U: jnp.ndarray | None = None  # (L, H, d, d) value matrices U^{l,h}
    rho: jnp.ndarray | None = None  # () the residual stream's weight ρ (1 or 0)


def logits(W, data: Data):
    """a_ikt = x_itᵀ W z_ik, with -inf where the mask forbids: (n, K, T). In the span form
    (data.R set) W is the coordinate vector e (p,) and a = a0 + Rᵀe, the same logits."""
    if data.R is None:
        a = jnp.einsum("ntd,de,nke->nkt", data.X, W, data.Q)
    else:
        assert data.a0 is not None  # set together with R (`batching.span_basis`)
        a = data.a0 + (W @ data.R).reshape(data.a0.shape)
    return jnp.where(data.mask, a, -jnp.inf)


def attention(W, data: Data):
    """s: (n, K, T) softmax weights (max-shifted, exactly 0 on masked tokens)."""
    return jax.nn.softmax(logits(W, data), axis=-1)


def head(r, data: Data, kind: str):
    """h(r) for r (..., d)."""
    if kind == "linear":
        return r @ data.v
    if kind == "relu":
        return jnp.sum(jax.nn.relu(r @ data.V), axis=-1)
    if kind == "quadratic":
        return r @ data.v - data.lam * jnp.sum(r * r, axis=-1)
    raise ValueError(f"`head` must be one of ['linear', 'relu', 'quadratic']; got {kind!r}")


def _features(data: Data, kind: str):
    """What the attention averages for the head: the linear and relu heads read r = Σ_t s_t
    x_t only through r·v and r V, and Σ_t s_t (x_tᵀv) = r·v, Σ_t s_t (x_tᵀV) = r V, so the
    attention averages those per-token features, (n, T, 1) and (n, T, d), instead of the
    tokens: the head's product then sits outside the softmax's dependence on W, and XLA
    hoists it out of the GD loop (multi-token's step 0.64 → 0.37 µs, docs/performance.md).
    The quadratic head needs r itself."""
    if kind == "linear":
        return jnp.sum(data.X * data.v[None, None, :], axis=-1, keepdims=True)
    if kind == "relu":
        return jnp.sum(data.X[..., :, None] * data.V[None, None], axis=-2)
    return data.X


def _head_of_features(h, data: Data, kind: str):
    """h(r) from the attention's average of `_features`."""
    if kind == "linear":
        return h[..., 0]
    if kind == "relu":
        return jnp.sum(jax.nn.relu(h), axis=-1)
    return head(h, data, kind)


def outputs(W, data: Data, kind: str, *, centred: bool = False):
    """f: (n, K) predictions and s: (n, K, T) attention.

    centred: differentiate r = Σ_t s_t x_t as x_ρ + Σ_t s_t (x_t − x_ρ), ρ = the argmax of
    the logits (an integer: no gradient flows through the choice). The same numbers, but the
    softmax backward then never subtracts two terms of size 1, so the gradient stays exact
    to rounding far into saturation (the plain form loses the selected token's term once
    1 − s_ρ < 2⁻⁵³, logit gaps ≳ 37: docs/followups.md §4b).
    """
    if not centred:
        s = attention(W, data)
        return _head_of_features(
            jnp.einsum("nkt,ntd->nkd", s, _features(data, kind)), data, kind
        ), s
    f, s, _ = centred_outputs(W, data, kind)
    return f, s


def centred_outputs(W, data: Data, kind: str, scaled=0.0):
    """(f, s, logscale): `outputs(centred=True)`, and with `scaled` ≠ 0 (traced) a backward
    that returns the gradient divided by e^{logscale}, logscale ≤ 0 the log of the largest
    non-selected softmax weight over the real sequences (0 if unscaled): for the scale-free
    normalized steps, which only use its direction and then keep moving after the weights
    themselves underflow (logit gaps ≳ 745)."""
    s, h, logscale = _attend_centred(logits(W, data), _features(data, kind), data.w, scaled)
    return _head_of_features(h, data, kind), s, logscale


def _top(a):
    """One-hot (bool) of the first argmax over the last axis."""
    idx = jnp.arange(a.shape[-1]).reshape((1,) * (a.ndim - 1) + (-1,))
    return idx == jnp.argmax(a, axis=-1)[..., None]


def _attend_parts(a, w, scaled):
    """The forward: s = softmax(a), the one-hot of ρ, e_t = e^{a_t − a_ρ − logscale} (0 at ρ
    and on masked tokens), Z = Σ_t e^{a_t − a_ρ} and logscale. One exp per entry, as a
    softmax; e is what the backward needs, so it computes no exp of its own."""
    top = _top(a)
    l = a - jnp.max(a, axis=-1, keepdims=True)  # ≤ 0, 0 at ρ
    tail = jnp.where(top | (w[..., None] <= 0), -jnp.inf, l)
    m = jnp.max(tail)
    logscale = jnp.where(jnp.isfinite(m) & (scaled != 0), jnp.minimum(m, 0.0), 0.0)
    e = jnp.where(top, 0.0, jnp.exp(l - logscale))
    Z = 1.0 + jnp.exp(logscale) * jnp.sum(e, axis=-1, keepdims=True)
    s = jnp.where(top, 1.0, e * jnp.exp(logscale)) / Z
    return s, top, e, Z, jax.lax.stop_gradient(logscale)


@jax.custom_vjp
def _attend_centred(a, X, w, scaled):
    """s = softmax(a) (n, K, T), r = Σ_t s_t x_t (n, K, d) and logscale, with the centred
    backward (X: the tokens' features, `_features`): with c_t the cotangent reaching s_t
    (through r: ⟨ḡ_r, x_t⟩), the logit gradient s_t (c_t − ⟨s, c⟩) is computed as
    s_t (c'_t − ⟨s, c'⟩), c' = c − c_ρ, ρ = argmax_t a_t. The same number in exact
    arithmetic (a softmax ignores a shift of c), but c'_ρ is exactly 0, so no term of size 1
    cancels (docs/followups.md §4b). Differentiating x_ρ + Σ_t s_t (x_t − x_ρ): c'_t is
    formed from x_t − x_ρ, so it is exactly 0 at ρ and at every token equal to x_ρ however
    XLA fuses the step (c_t − c_ρ, two products rounded apart, broke a tie of identical
    tokens by 1e-19 once fused with a contraction into an FMA). The logit
    gradient comes out times e^{−logscale} (`centred_outputs`): the weights s_t, t ≠ ρ, enter
    as e_t / Z, and ρ's term −s_ρ ⟨s, c'⟩ as −s_ρ ⟨e/Z, c'⟩."""
    s, _, _, _, logscale = _attend_parts(a, w, scaled)
    return s, jnp.einsum("nkt,ntd->nkd", s, X), logscale


def _attend_fwd(a, X, w, scaled):
    s, top, e, Z, logscale = _attend_parts(a, w, scaled)
    out = (s, jnp.einsum("nkt,ntd->nkd", s, X), logscale)
    return out, (s, top, e, Z, X, w, scaled, logscale)


def _attend_bwd(res, cts):
    s, top, e, Z, X, w, scaled, logscale = res
    gs, gr, _ = cts
    x_rho = jnp.sum(jnp.where(top[..., None], X[:, None], 0.0), axis=2)  # (n, K, d), exact
    gs_rho = jnp.sum(jnp.where(top, gs, 0.0), axis=-1, keepdims=True)
    c = (
        jnp.einsum("nkd,nktd->nkt", gr, X[:, None] - x_rho[:, :, None])  # exactly 0 at ρ
        + (gs - gs_rho)
    )
    u = e / Z  # s_t e^{−logscale}
    sig = jnp.sum(u * c, axis=-1, keepdims=True)  # ⟨s, c'⟩ e^{−ls}
    ga = jnp.where(top, -s * sig, u * (c - jnp.exp(logscale) * sig))
    return (ga, jnp.einsum("nkt,nkd->ntd", s, gr), jnp.zeros_like(w), jnp.zeros_like(scaled))


_attend_centred.defvjp(_attend_fwd, _attend_bwd)


def loss_fn(u, kind: str):
    """ℓ(u), computed stably."""
    if kind == "logistic":
        return jnp.logaddexp(0.0, -u)  # log(1 + e^{-u})
    if kind == "exponential":
        return jnp.exp(-u)
    if kind == "correlation":
        return -u
    raise ValueError(f"`loss` must be one of {list(LOSSES)}; got {kind!r}")


def risk(W, data: Data, head_kind: str, loss_kind: str):
    """L(W) = Σ_ik w_ik ℓ(Y_ik f_ik) (no ridge)."""
    f, _ = outputs(W, data, head_kind)
    return jnp.sum(data.w * loss_fn(data.Y * f, loss_kind))


def objective_and_records(
    params,
    data: Data,
    ridge,
    *,
    param: str,
    head_kind: str,
    loss_kind: str,
    centred: bool = False,
    scaled=False,
):
    """What GD minimizes, with what it records: (objective, (L, s, W, logscale)).

    objective = L(W) for "W"; L(K Qᵀ) + ridge (‖K‖² + ‖Q‖²) for "KQ" (the GD engine
    differentiates exactly this function; `objective` is its first output).
    scaled (centred, "W" only; may be traced): the gradient comes out divided by
    e^{logscale} (`centred_outputs`; logscale = 0 when not scaled): for the scale-free
    normalized steps, which then keep moving after the non-selected weights underflow.
    """
    W = as_W(params, param)
    if centred:
        flag = jnp.asarray(scaled if param == "W" else False, W.dtype)
        f, s, logscale = centred_outputs(W, data, head_kind, flag)
    else:
        f, s = outputs(W, data, head_kind)
        logscale = jnp.zeros((), W.dtype)
    L = jnp.sum(data.w * loss_fn(data.Y * f, loss_kind))
    total = L
    if param == "KQ":
        K, Q = params
        total = L + ridge * (jnp.sum(K * K) + jnp.sum(Q * Q))
    return total, (L, s, W, logscale)


def joint_objective(params, *, objective, data: Data):
    """`objective` (a partial of `objective_and_records` on `data`) at params = (attention
    params, v), with v in place of the fixed head vector `data.v` (trained head)."""
    inner, v = params
    return objective(inner, data=data._replace(v=v))


def objective(
    params, data: Data, ridge, *, param: str, head_kind: str, loss_kind: str, centred: bool = False
):
    """What GD minimizes: L(W) for "W"; L(K Qᵀ) + ridge (‖K‖² + ‖Q‖²) for "KQ"."""
    return objective_and_records(
        params, data, ridge, param=param, head_kind=head_kind, loss_kind=loss_kind, centred=centred
    )[0]


def as_W(params, param: str):
    """The combined matrix W (= K Qᵀ for the (K, Q)-parameterization)."""
    if param == "W":
        return params
    K, Q = params
    return K @ Q.T
