"""GD on a stack of attention layers (`attsvm.stack`, docs/hierarchy.md) against the
one-layer engine and against an independent plain reference of the model's formula."""

import numpy as np
import pytest

import attsvm
from attsvm.stack import stack_init, train_stack

jax = pytest.importorskip("jax")
jnp = jax.numpy


def _rel(a, b):
    return np.linalg.norm(np.asarray(a) - b) / np.linalg.norm(b)


@pytest.mark.parametrize("param", ["W", "KQ"])
def test_one_layer_one_head_is_train(param):
    """L = H = 1, ρ = 0, U = I is the paper's model with z_i = x_iq: `attsvm.train` step
    for step (its default init, the same draws)."""
    prob = attsvm.random_problem(n=5, T=5, d=4, seed=3, attention="self", query_index=2)
    ref = attsvm.train(prob, param=param, steps=200, lr=0.1)
    run = train_stack(
        prob,
        layers=1,
        heads=1,
        steps=200,
        lr=0.1,
        residual=False,
        values=np.eye(4)[None, None],
        param=param,
    )
    assert run.W.shape == (201, 1, 1, 4, 4)
    for k in range(201):
        assert _rel(run.W[k, 0, 0], ref.W[k]) < 1e-10
    np.testing.assert_allclose(run.loss, ref.loss, rtol=1e-10)
    np.testing.assert_allclose(run.attention[:, 0, 0, :, 2], ref.probs, rtol=1e-9, atol=1e-300)


def _plain_loss(Ws, X, Y, v, U, q, rho, causal):
    """(1/n) Σ_i log(1 + exp(−Y_i vᵀ h^L_iq)), written out sequence by sequence."""
    n, T, d = X.shape
    total = 0.0
    for i in range(n):
        h = X[i]
        for l in range(Ws.shape[0]):
            new = rho * h
            for hd in range(Ws.shape[1]):
                A = h @ Ws[l, hd] @ h.T  # A[s, t] = h_sᵀ W h_t
                rows = []
                for t in range(T):
                    a = A[:, t]
                    if causal:
                        a = jnp.where(jnp.arange(T) <= t, a, -jnp.inf)
                    e = jnp.exp(a - jnp.max(a))
                    S = e / jnp.sum(e)
                    rows.append(sum(S[s] * (U[l, hd].T @ h[s]) for s in range(T)))
                new = new + jnp.stack(rows)
            h = new
        total = total + jnp.log1p(jnp.exp(-Y[i] * (v @ h[q])))
    return total / n


@pytest.mark.parametrize("heads,causal", [(2, False), (1, True)])
def test_two_layers_match_plain_reference(heads, causal):
    """First 30 steps of per-head normalized GD, residual on, random U, against a plain
    numpy loop whose gradient is jax.grad of `_plain_loss`."""
    L, steps, lr = 2, 30, 0.2
    prob = attsvm.random_problem(n=3, T=4, d=3, seed=5, attention="self", query_index=3)
    U = np.random.default_rng(9).normal(size=(L, heads, 3, 3)) / 2
    run = train_stack(
        prob, layers=L, heads=heads, steps=steps, lr=lr, causal=causal, values=U, seed=4
    )
    grad = jax.jit(jax.grad(lambda W: _plain_loss(W, prob.X, prob.Y, prob.v, U, 3, 1.0, causal)))
    W = stack_init(prob, L, heads, seed=4)
    for k in range(steps + 1):
        assert _rel(run.W[k], W) < 1e-8, k
        g = np.asarray(grad(W))
        W = W - lr * g / np.linalg.norm(g, axis=(-2, -1), keepdims=True)
    assert float(
        _plain_loss(run.W[-1], prob.X, prob.Y, prob.v, U, 3, 1.0, causal)
    ) == pytest.approx(run.loss[-1], rel=1e-10)


def _numpy_inputs(Ws, X, U, rho, causal):
    """h^0 … h^L by a plain numpy loop of the model's formula."""
    hs = [X]
    n, T, _ = X.shape
    for l in range(Ws.shape[0]):
        h = hs[-1]
        new = rho * h.copy()
        for i in range(n):
            for hd in range(Ws.shape[1]):
                A = h[i] @ Ws[l, hd] @ h[i].T  # A[s, t]
                for t in range(T):
                    a = A[:, t]
                    if causal:
                        a = np.where(np.arange(T) <= t, a, -np.inf)
                    e = np.exp(a - a.max())
                    new[i, t] += (e / e.sum()) @ (h[i] @ U[l, hd])
        hs.append(new)
    return hs


def test_audit_of_a_last_layer_head_matches_cvxpy():
    """A last-layer head's cos equals the cosine with a cvxpy Att-SVM of that head's final
    selection at the query token, on its own final inputs h^{L−1} (a numpy forward)."""
    cp = pytest.importorskip("cvxpy")
    pytest.importorskip("attsvm.audit")
    from attsvm.stack import audit_stack

    prob = attsvm.random_problem(n=4, T=4, d=5, seed=2, attention="self", query_index=3)
    run = train_stack(prob, layers=2, heads=2, steps=400, lr=0.2, record_every=40)
    audit = audit_stack(prob, run)
    assert audit.cos.shape == (2, 2) and audit.selections.shape == (2, 2, 4, 4)
    hs = _numpy_inputs(run.W[-1], prob.X, run.values, 1.0, False)
    H = hs[1]
    for hd in range(2):
        Wh = run.W[-1, 1, hd]
        a = H @ Wh @ H[:, 3, :, None]  # (n, T, 1): h_sᵀ W h_q
        alpha = a[..., 0].argmax(-1)
        np.testing.assert_array_equal(audit.selections[1, hd, :, 3], alpha)
        W = cp.Variable((5, 5))
        cons = [
            (H[i, alpha[i]] - H[i, s]) @ W @ H[i, 3] >= 1
            for i in range(4)
            for s in range(4)
            if s != alpha[i]
        ]
        cp.Problem(cp.Minimize(cp.sum_squares(W)), cons).solve(solver="CLARABEL")
        ref = float(np.sum(Wh * W.value) / (np.linalg.norm(Wh) * np.linalg.norm(W.value)))
        assert audit.cos[1, hd] == pytest.approx(ref, abs=1e-4)
    assert np.all(audit.coverage[1] == 1.0)


def test_bad_settings_are_refused_by_name():
    prob = attsvm.random_problem(n=3, T=4, d=3, seed=0, attention="self")
    for kw, word in [
        (dict(layers=0), "`layers`"),
        (dict(heads=9), "`heads`"),
        (dict(optimizer="polyak"), "`optimizer`"),
        (dict(values=np.ones((2, 2, 3, 4))), "`values`"),
        (dict(init=np.full((2, 2, 3, 3), np.nan)), "`init`"),
        (dict(residual="yes"), "`residual`"),
        (dict(record_every=7), "divide"),
    ]:
        with pytest.raises(ValueError, match=word):
            train_stack(prob, steps=10, **kw)
    with pytest.raises(ValueError, match="self-attention"):
        train_stack(attsvm.random_problem(n=3, T=4, d=3, seed=0), steps=10)


def test_hosted_mode_prices_the_page_sizes():
    """The page's acceptance size fits the hosted budget; its largest settings are refused
    with the largest steps that fit."""
    from attsvm import limits, stack_live

    hosted = limits.LIMITS["hosted"]
    spec = stack_live.StackSpec()  # L = H = 2, n = T = 8, d = 16, 2000
    work = limits.check_stack(
        n=8, T=8, d=16, layers=2, heads=2, steps=2000, limits=hosted, record_every=10
    )
    assert 0 < work < hosted.max_work and spec.checked() == spec
    with pytest.raises(limits.BudgetError, match="steps="):
        limits.check_stack(n=32, T=16, d=32, layers=3, heads=4, steps=20_000, limits=hosted)


def test_batch_and_chunks_continue_exactly():
    """A batch of two problems is the two single runs; a run continued from `final` is the
    run done in one call, to rounding."""
    probs = [attsvm.random_problem(n=3, T=4, d=3, seed=s, attention="self") for s in (1, 2)]
    batch = train_stack(probs, layers=2, heads=2, steps=40, lr=0.1)
    one = train_stack(
        probs[1], layers=2, heads=2, steps=40, lr=0.1, init=stack_init(probs[1], 2, 2, index=1)
    )
    np.testing.assert_allclose(batch[1].W, one.W, rtol=1e-12, atol=1e-14)
    half = train_stack(probs[1], layers=2, heads=2, steps=20, lr=0.1, init=one.W[0])
    rest = train_stack(probs[1], layers=2, heads=2, steps=20, lr=0.1, init=half.final)
    np.testing.assert_allclose(rest.W[-1], one.W[-1], rtol=1e-12, atol=1e-14)


def test_audit_of_kq_heads_adds_the_nuclear_norm_svm():
    pytest.importorskip("attsvm.audit")
    from attsvm.stack import audit_stack

    prob = attsvm.random_problem(n=4, T=4, d=5, seed=2, attention="self", query_index=3)
    run = train_stack(prob, layers=2, heads=1, steps=200, lr=0.2, record_every=200, param="KQ")
    audit = audit_stack(prob, run)
    assert audit.cos_nuc.shape == (2, 1) and np.all(np.abs(audit.cos_nuc) <= 1 + 1e-12)
    Wn = audit.heads[1][0].svm_nuc.W
    W = run.W[-1, 1, 0]
    assert audit.cos_nuc[1, 0] == pytest.approx(
        np.sum(W * Wn) / np.linalg.norm(W) / np.linalg.norm(Wn), rel=1e-12
    )
