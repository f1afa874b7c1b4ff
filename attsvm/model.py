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

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402

LOSSES = ("logistic", "exponential", "correlation")


class Data(NamedTuple):
    """Arrays of one (possibly padded) problem, as they cross `jit`."""

    X: jnp.ndarray      # (n, T, d) tokens
    Q: jnp.ndarray      # (n, K, d) queries z_ik
    Y: jnp.ndarray      # (n, K) labels
    mask: jnp.ndarray   # (n, K, T) bool: token t is attendable by query (i, k)
    w: jnp.ndarray      # (n, K) loss weights: 1/n for real queries, 0 for padding
    v: jnp.ndarray      # (d,) head vector (linear, quadratic)
    V: jnp.ndarray      # (d, d) relu head's first layer
    lam: jnp.ndarray    # () quadratic head's λ


def logits(W, data: Data):
    """a_ikt = x_itᵀ W z_ik, with -inf where the mask forbids: (n, K, T)."""
    a = jnp.einsum("ntd,de,nke->nkt", data.X, W, data.Q)
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


def outputs(W, data: Data, kind: str, *, centred: bool = False, logscale=0.0):
    """f: (n, K) predictions and s: (n, K, T) attention.

    centred: differentiate r = Σ_t s_t x_t as x_ρ + Σ_t s_t (x_t − x_ρ), ρ = the argmax of
    the logits (an integer: no gradient flows through the choice). The same numbers, but the
    softmax backward then never subtracts two terms of size 1, so the gradient stays exact
    to rounding far into saturation (the plain form loses the selected token's term once
    1 − s_ρ < 2⁻⁵³, logit gaps ≳ 37: docs/followups.md §4b).
    logscale (centred only): the backward returns the gradient times e^{−logscale}
    (`tail_logscale`): for the scale-free normalized rules, which only use its direction.
    """
    if not centred:
        s = attention(W, data)
        r = jnp.einsum("nkt,ntd->nkd", s, data.X)
        return head(r, data, kind), s
    s, r = _attend_centred(logits(W, data), data.X, logscale)
    return head(r, data, kind), s


def _top(a):
    """One-hot (bool) of the first argmax over the last axis."""
    idx = jnp.arange(a.shape[-1]).reshape((1,) * (a.ndim - 1) + (-1,))
    return idx == jnp.argmax(a, axis=-1)[..., None]


def tail_logscale(a, w):
    """max over sequences (weight w > 0) and non-top tokens of a_t − max_u a_u: the log of
    the largest non-selected softmax weight (up to the normalizer), 0 if there is none.
    Dividing the gradient by e^{that} keeps it representable after the weights themselves
    underflow (gaps ≳ 745); a normalized step does not see the factor."""
    l = a - jnp.max(a, axis=-1, keepdims=True)
    top = _top(a)
    l = jnp.where(top | (w[..., None] <= 0), -jnp.inf, l)
    m = jnp.max(l)
    return jax.lax.stop_gradient(jnp.where(jnp.isfinite(m), jnp.minimum(m, 0.0), 0.0))


@jax.custom_vjp
def _attend_centred(a, X, logscale):
    """s = softmax(a) (n, K, T) and r = Σ_t s_t x_t (n, K, d), whose backward is the centred
    one: with c_t the cotangent reaching s_t (through r: ⟨ḡ_r, x_t⟩), the logit gradient
    s_t (c_t − ⟨s, c⟩) is computed as s_t (c'_t − ⟨s, c'⟩), c' = c − c_ρ, ρ = argmax_t a_t.
    The same number in exact arithmetic (a softmax ignores a shift of c), but c'_ρ is exactly
    0, so no term of size 1 cancels (docs/followups.md §4b). Equivalent to differentiating
    x_ρ + Σ_t s_t (x_t − x_ρ) without forming the (n, K, T, d) differences. The logit
    gradient comes out times e^{−logscale}: the weights s_t, t ≠ ρ, are taken as
    e^{a_t − a_ρ − logscale} / Σ_u e^{a_u − a_ρ}, and ρ's term −s_ρ ⟨s, c'⟩ e^{−logscale}."""
    s = jax.nn.softmax(a, axis=-1)
    return s, jnp.einsum("nkt,ntd->nkd", s, X)


def _attend_fwd(a, X, logscale):
    s, r = _attend_centred(a, X, logscale)
    return (s, r), (a, s, X, logscale)


def _attend_bwd(res, cts):
    a, s, X, logscale = res
    gs, gr = cts
    top = _top(a)                                                           # (n, K, T)
    c = jnp.einsum("nkd,ntd->nkt", gr, X) + gs
    c = c - jnp.sum(jnp.where(top, c, 0.0), axis=-1, keepdims=True)         # exactly 0 at ρ
    ok = jnp.isfinite(a)                                                    # masked: a = −inf
    c = jnp.where(ok, c, 0.0)
    l = jnp.where(ok, a - jnp.max(a, axis=-1, keepdims=True), -jnp.inf)     # ≤ 0, 0 at ρ
    Zs = jnp.sum(jnp.exp(l), axis=-1, keepdims=True)                        # ≥ 1
    w = jnp.where(top, 0.0, jnp.exp(l - logscale) / Zs)                     # s_t e^{−logscale}
    sig = jnp.sum(w * c, axis=-1, keepdims=True)                            # ⟨s, c'⟩ e^{−ls}
    ga = jnp.where(top, -s * sig, w * (c - jnp.exp(logscale) * sig))
    return ga, jnp.einsum("nkt,nkd->ntd", s, gr), jnp.zeros_like(logscale)


_attend_centred.defvjp(_attend_fwd, _attend_bwd)


def loss_fn(u, kind: str):
    """ℓ(u), computed stably."""
    if kind == "logistic":
        return jnp.logaddexp(0.0, -u)          # log(1 + e^{-u})
    if kind == "exponential":
        return jnp.exp(-u)
    if kind == "correlation":
        return -u
    raise ValueError(f"`loss` must be one of {list(LOSSES)}; got {kind!r}")


def risk(W, data: Data, head_kind: str, loss_kind: str):
    """L(W) = Σ_ik w_ik ℓ(Y_ik f_ik) (no ridge)."""
    f, _ = outputs(W, data, head_kind)
    return jnp.sum(data.w * loss_fn(data.Y * f, loss_kind))


def objective_and_records(params, data: Data, ridge, *, param: str, head_kind: str,
                          loss_kind: str, centred: bool = False, scaled=False):
    """What GD minimizes, with what it records: (objective, (L, s, W, logscale)).

    objective = L(W) for "W"; L(K Qᵀ) + ridge (‖K‖² + ‖Q‖²) for "KQ" (the GD engine
    differentiates exactly this function; `objective` is its first output).
    scaled (centred, "W" only; may be traced): the gradient comes out divided by
    e^{logscale}, logscale = `tail_logscale` ≤ 0 (0 when not scaled): for the scale-free
    normalized steps, which then keep moving after the non-selected weights underflow.
    """
    W = as_W(params, param)
    logscale = jnp.zeros((), W.dtype)
    if centred and param == "W" and scaled is not False:
        logscale = jnp.where(scaled, tail_logscale(logits(W, data), data.w), 0.0)
    f, s = outputs(W, data, head_kind, centred=centred, logscale=logscale)
    L = jnp.sum(data.w * loss_fn(data.Y * f, loss_kind))
    total = L
    if param == "KQ":
        K, Q = params
        total = L + ridge * (jnp.sum(K * K) + jnp.sum(Q * Q))
    return total, (L, s, W, logscale)


def objective(params, data: Data, ridge, *, param: str, head_kind: str, loss_kind: str,
              centred: bool = False):
    """What GD minimizes: L(W) for "W"; L(K Qᵀ) + ridge (‖K‖² + ‖Q‖²) for "KQ"."""
    return objective_and_records(params, data, ridge, param=param, head_kind=head_kind,
                                 loss_kind=loss_kind, centred=centred)[0]


def as_W(params, param: str):
    """The combined matrix W (= K Qᵀ for the (K, Q)-parameterization)."""
    if param == "W":
        return params
    K, Q = params
    return K @ Q.T
