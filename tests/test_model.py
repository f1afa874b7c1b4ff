"""attsvm.model: forward pass, heads, losses and gradients against independent references.

One contract runs over every variant: head × loss × parameterization, and the sequence /
causal query modes (optax style). References: a plain numpy forward and finite differences
of it (tests/reference.py), and the closed-form gradient of docs/theory.md §1 (fact 1).
"""

from __future__ import annotations

import hypothesis.extra.numpy as hnp
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from reference import np_forward, np_grad, np_objective, rel

import attsvm
from attsvm import batching, model

HEADS = ("linear", "relu", "quadratic")
LOSSES = ("logistic", "exponential", "correlation")
PARAMS = ("W", "KQ")


def as_data(prob):
    """The problem as the engine sees it (unpadded)."""
    return model.Data(**{k: jnp.asarray(a) for k, a in batching.pad_data(prob, prob.shape).items()})


def small_problem(head, *, queries="single", attention="cross", seed=0, n=3, T=4, d=3):
    """A small problem whose relu pre-activations stay far from the kink.

    Tokens have entries in [0.5, 1.5] (so r = Xᵀs does too) and the relu head's V has one
    all-positive and one all-negative column: every pre-activation rᵀV_j is ≥ 0.5·|V_j|₁
    away from 0 for any attention s. Labels are mixed so ℓ' varies in sign of Y.
    """
    rng = np.random.default_rng(seed)
    X = rng.uniform(0.5, 1.5, (n, T, d))
    Y = rng.choice([-1.0, 1.0], (n,) if queries == "single" else (n, T))
    Y.flat[0], Y.flat[-1] = 1.0, -1.0
    Z = None
    if attention == "cross":
        Z = rng.standard_normal((n, d) if queries == "single" else (n, T, d))
    V = None
    if head == "relu":
        V = np.zeros((d, d))
        V[:, 0] = rng.uniform(0.2, 1.0, d)
        V[:, 1] = -rng.uniform(0.2, 1.0, d)
        V[:, 2:] = rng.uniform(0.2, 1.0, (d, d - 2))
    return attsvm.Problem(
        X=X,
        Y=Y,
        Z=Z,
        v=rng.standard_normal(d),
        head=head,
        V=V,
        lam=0.3 if head == "quadratic" else 0.0,
        queries=queries,
    )


def random_params(param, d, seed=1, m=None):
    rng = np.random.default_rng(seed)
    if param == "W":
        return 0.5 * rng.standard_normal((d, d))
    m = d if m is None else m
    return 0.7 * rng.standard_normal((d, m)), 0.7 * rng.standard_normal((d, m))


def fd_grad(fun, params, h=1e-6):
    """Central finite differences of a numpy scalar function of an array or a pair."""
    leaves = [params] if isinstance(params, np.ndarray) else list(params)
    grads = []
    for j, a in enumerate(leaves):
        g = np.zeros_like(a)
        for idx in np.ndindex(a.shape):

            def at(delta):
                b = [x.copy() for x in leaves]
                b[j][idx] += delta
                return fun(b[0] if isinstance(params, np.ndarray) else tuple(b))

            g[idx] = (at(h) - at(-h)) / (2 * h)
        grads.append(g)
    return grads[0] if isinstance(params, np.ndarray) else tuple(grads)


def jax_grad(prob, params, param, loss, ridge):
    data = as_data(prob)
    p = jnp.asarray(params) if param == "W" else tuple(jnp.asarray(a) for a in params)
    g = jax.grad(model.objective)(p, data, ridge, param=param, head_kind=prob.head, loss_kind=loss)
    return np.asarray(g) if param == "W" else tuple(np.asarray(a) for a in g)


def assert_grads_close(g, ref, rtol):
    g = (g,) if isinstance(g, np.ndarray) else g
    ref = (ref,) if isinstance(ref, np.ndarray) else ref
    for a, b in zip(g, ref, strict=True):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol * np.abs(b).max())


# -- forward ---------------------------------------------------------------------------
@pytest.mark.parametrize("queries", ["single", "sequence", "causal"])
@pytest.mark.parametrize("head", HEADS)
def test_outputs_match_numpy_forward(head, queries):
    prob = small_problem(head, queries=queries)
    W = random_params("W", prob.d)
    f, s = model.outputs(jnp.asarray(W), as_data(prob), head)
    f_ref, s_ref, _ = np_forward(prob, W)
    np.testing.assert_allclose(np.asarray(f), f_ref, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(np.asarray(s), s_ref, rtol=1e-13, atol=1e-15)


def test_relu_test_data_stays_away_from_the_kink():
    prob = small_problem("relu")
    _, _, r = np_forward(prob, random_params("W", prob.d))
    assert np.abs(r @ prob.V).min() > 0.1


def test_loss_is_stable_for_large_margins():
    u = jnp.array([-800.0, -40.0, 0.0, 40.0, 800.0])
    L = np.asarray(model.loss_fn(u, "logistic"))
    assert np.all(np.isfinite(L))
    np.testing.assert_allclose(L, np.logaddexp(0.0, -np.asarray(u)), rtol=1e-15)


# -- gradients: one contract over every head × loss × parameterization -----------------------
@pytest.mark.parametrize("param", PARAMS)
@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize("head", HEADS)
def test_gradient_matches_finite_differences(head, loss, param):
    prob = small_problem(head, seed=10 * HEADS.index(head) + LOSSES.index(loss))
    ridge = 0.01 if param == "KQ" else 0.0  # large enough for FD to see the ridge term
    params = random_params(param, prob.d, m=2 if param == "KQ" else None)
    g = jax_grad(prob, params, param, loss, ridge)
    ref = fd_grad(lambda p: np_objective(prob, p, param, loss, ridge), params)
    assert_grads_close(g, ref, rtol=1e-6)
    assert_grads_close(np_grad(prob, params, param, loss, ridge), ref, rtol=1e-6)


@pytest.mark.parametrize("attention", ["cross", "self"])
@pytest.mark.parametrize("queries", ["sequence", "causal"])
@pytest.mark.parametrize("head", HEADS)
def test_gradient_matches_finite_differences_sequence_modes(head, queries, attention):
    prob = small_problem(head, queries=queries, attention=attention, seed=7)
    for param in PARAMS:
        params = random_params(param, prob.d, seed=3)
        g = jax_grad(prob, params, param, "logistic", 0.01)
        ref = fd_grad(lambda p: np_objective(prob, p, param, "logistic", 0.01), params)
        assert_grads_close(g, ref, rtol=1e-6)


def test_causal_query_ignores_future_tokens():
    prob = small_problem("linear", queries="causal")
    W = random_params("W", prob.d)
    _, s = model.outputs(jnp.asarray(W), as_data(prob), "linear")
    s = np.asarray(s)  # (n, K, T)
    assert np.all(s[:, np.triu_indices(prob.T, 1)[0], np.triu_indices(prob.T, 1)[1]] == 0.0)
    np.testing.assert_allclose(s[:, 0, 0], 1.0)  # query 0 sees only token 0


# -- fact 1: the closed-form gradient of docs/theory.md §1 ------------------------------
def test_closed_form_gradient_of_the_linear_head():
    """∇_W f = Xᵀ(diag(s) − ssᵀ) X v zᵀ and ∇L = (1/n) Σ ℓ'(Y f) Y ∇f (n=4, T=5, d=3)."""
    prob = attsvm.random_problem(4, 5, 3, seed=11)
    W = random_params("W", 3, seed=5)
    data = as_data(prob)
    f_all, s_all = model.outputs(jnp.asarray(W), data, "linear")
    total = np.zeros((3, 3))
    for i in range(prob.n):
        X, z, s = prob.X[i], prob.Z[i], np.asarray(s_all)[i, 0]
        closed = X.T @ (np.diag(s) - np.outer(s, s)) @ X @ prob.v[:, None] @ z[None, :]
        fi = jax.grad(lambda W_: model.outputs(W_, data, "linear")[0][i, 0])(jnp.asarray(W))
        np.testing.assert_allclose(np.asarray(fi), closed, rtol=1e-13, atol=1e-15)
        u = prob.Y[i] * float(f_all[i, 0])
        total += -1.0 / (1.0 + np.exp(u)) * prob.Y[i] * closed / prob.n
    g = jax.grad(model.risk)(jnp.asarray(W), data, "linear", "logistic")
    assert rel(np.asarray(g), total) < 1e-13


def test_kq_gradient_is_the_chain_rule_of_w():
    """∇_K = ∇_W L · Q and ∇_Q = (∇_W L)ᵀ K (ridge 0)."""
    prob = attsvm.random_problem(4, 5, 3, seed=2)
    K, Q = random_params("KQ", 3, seed=8)
    gW = jax_grad(prob, K @ Q.T, "W", "logistic", 0.0)
    gK, gQ = jax_grad(prob, (K, Q), "KQ", "logistic", 0.0)
    np.testing.assert_allclose(gK, gW @ Q, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(gQ, gW.T @ K, rtol=1e-12, atol=1e-15)


# -- properties of the softmax ------------------------------------------------------------------
@given(
    W=hnp.arrays(np.float64, (4, 4), elements=st.floats(-60, 60)), keep=hnp.arrays(np.bool_, (4,))
)
def test_softmax_is_a_distribution_that_is_zero_where_masked(W, keep):
    keep[0] = True
    prob = small_problem("linear", n=2, T=4, d=4)
    data = as_data(prob)._replace(mask=jnp.asarray(np.broadcast_to(keep, (2, 1, 4))))
    s = np.asarray(model.attention(jnp.asarray(W), data))
    assert np.all(np.isfinite(s)) and np.all(s >= 0)
    np.testing.assert_allclose(s.sum(-1), 1.0, rtol=1e-14)
    assert np.all(s[..., ~keep] == 0.0)
