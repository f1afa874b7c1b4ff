"""The centred softmax gradient (docs/followups.md §4b; attsvm.optimizers.centred_objective).

(1) Where the plain gradient is accurate (moderate logits) the two agree to 1e-12, for every
head, query mode, loss and parameterization, and both match the manual numpy gradient.
(2) Deep in saturation (logit gaps 40-600, where 1 − s_max rounds to 0 in float64) the centred
gradient and the cancellation-free L − L* agree with a 400-digit `decimal` evaluation of the
plain formulas (no mpmath in the environment) to 1e-11 relative, while the plain float64
gradient is wrong — not zero: it keeps Σ_t s_t (h_t − h_ρ) x_t zᵀ and loses the −x_ρ term.
"""

from __future__ import annotations

from decimal import Decimal, localcontext
from functools import partial

import jax
import numpy as np
import pytest
from reference import np_grad, rel

import attsvm
from attsvm import model
from attsvm import optimizers as O

GAPS = (40, 100, 300, 600)


def srel(a, b):
    """rel(a, b) computed on a scaled copy (‖b‖² of a 1e-260 gradient underflows)."""
    m = np.abs(b).max()
    return rel(np.asarray(a) / m, np.asarray(b) / m)


@partial(jax.jit, static_argnames=("param", "head_kind", "loss_kind"))
def _both(params, data, ridge, **kw):
    return (
        jax.grad(model.objective)(params, data, ridge, **kw),
        jax.grad(O.centred_objective)(params, data, ridge, **kw),
    )


def grads(prob, params, param, loss, ridge=0.0):
    plain, cent = _both(
        params, O.problem_data(prob), ridge, param=param, head_kind=prob.head, loss_kind=loss
    )
    flat = (
        (lambda g: np.asarray(g))
        if param == "W"
        else (lambda g: np.concatenate([np.ravel(a) for a in g]))
    )
    return flat(plain), flat(cent)


@pytest.mark.parametrize("head", ["linear", "relu", "quadratic"])
@pytest.mark.parametrize("queries", ["single", "sequence", "causal"])
def test_centred_gradient_is_the_gradient_at_moderate_logits(head, queries):
    prob = attsvm.random_problem(3, 4, 5, seed=7, head=head, queries=queries)
    W = attsvm.default_init(prob, "W", seed=2) * 4
    plain, cent = grads(prob, W, "W", "logistic")
    assert rel(cent, plain) <= 1e-12
    assert rel(cent, np_grad(prob, W, "W", "logistic")) <= 1e-12


def test_centred_gradient_is_the_gradient_for_every_loss_and_for_kq():
    prob = attsvm.random_problem(3, 4, 5, seed=8, head="quadratic")
    W = attsvm.default_init(prob, "W", seed=2) * 4
    for loss in ("exponential", "correlation"):
        plain, cent = grads(prob, W, "W", loss)
        assert rel(cent, plain) <= 1e-12
        assert rel(cent, np_grad(prob, W, "W", loss)) <= 1e-12
    K, Q = attsvm.default_init(prob, "KQ", seed=3)
    plain, cent = grads(prob, (2 * K, 2 * Q), "KQ", "logistic", ridge=1e-3)
    assert rel(cent, plain) <= 1e-12


def test_centred_outputs_are_the_outputs():
    prob = attsvm.random_problem(3, 4, 5, seed=1, head="quadratic", queries="causal")
    data = O.problem_data(prob)
    W = attsvm.default_init(prob, "W", seed=0) * 5
    f0, s0 = model.outputs(W, data, "quadratic")
    f1, s1 = O.centred_outputs(W, data, "quadratic")
    np.testing.assert_allclose(np.asarray(f1), np.asarray(f0), rtol=1e-13, atol=1e-15)
    # the centred softmax sums 1 + Σ_{t≠ρ} e^{a_t − a_ρ} in its own order: an ulp apart
    np.testing.assert_allclose(np.asarray(s1), np.asarray(s0), rtol=4e-16, atol=0)


# -- the high-precision reference -----------------------------------------------------------
def decimal_reference(prob, W, digits=400):
    """(∂L/∂W, L − L*) of the logistic loss, single-query linear/quadratic head, from the
    plain formulas in `digits`-digit decimal arithmetic on the exact float64 inputs:
    a_t = x_tᵀ W z, s = softmax(a), r = Σ s_t x_t, f = h(r),
    ∂L/∂a_t = ℓ'(Y f) Y s_t (c_t − ⟨s, c⟩)/n with c_t = ∇h(r)·x_t, ∂L/∂W = Σ_t ∂L/∂a_t x_t zᵀ."""
    with localcontext() as ctx:
        ctx.prec = digits
        D = np.vectorize(Decimal)
        X, Z, v, Wd = D(prob.X), D(prob.Z), D(prob.v), D(W)
        lam = Decimal(prob.lam)
        n, T, d = prob.X.shape
        G = np.full((d, d), Decimal(0))
        gap = Decimal(0)
        for i in range(n):
            y = Decimal(prob.Y[i])
            a = [
                sum(X[i, t, j] * sum(Wd[j, k] * Z[i, k] for k in range(d)) for j in range(d))
                for t in range(T)
            ]
            amax = max(a)
            e = [(at - amax).exp() for at in a]
            Ssum = sum(e)
            s = [et / Ssum for et in e]
            r = [sum(s[t] * X[i, t, j] for t in range(T)) for j in range(d)]
            f = sum(v[j] * r[j] for j in range(d)) - lam * sum(rj * rj for rj in r)
            hr = [v[j] - 2 * lam * r[j] for j in range(d)]
            c = [sum(hr[j] * X[i, t, j] for j in range(d)) for t in range(T)]
            sc = sum(s[t] * c[t] for t in range(T))
            u = y * f
            dl = -1 / (1 + u.exp())  # ℓ'(u), logistic
            for t in range(T):
                ga = dl * y * s[t] * (c[t] - sc) / n
                G += np.outer(X[i, t], Z[i]) * ga
            gam = max(y * sum(v[j] * X[i, t, j] for j in range(d)) for t in range(T))
            ell = lambda z: (1 + (-z).exp()).ln()  # noqa: E731
            gap += (ell(u) - ell(gam)) / n
        return np.array(G, dtype=float), float(gap)


@pytest.mark.parametrize("gap", GAPS)
def test_centred_gradient_is_exact_deep_in_saturation(gap):
    prob = attsvm.random_problem(3, 4, 4, seed=5)
    Wmm = attsvm.solve_att_svm(prob).W
    W = gap * Wmm  # every non-selected logit ≥ `gap` below the top
    G_ref, gap_ref = decimal_reference(prob, W)
    plain, cent = grads(prob, W, "W", "logistic")
    assert 0 < np.abs(G_ref).max() < np.exp(-0.9 * gap)
    assert srel(cent, G_ref) <= 1e-11
    assert srel(plain, G_ref) > 0.1  # the plain form is wrong, not merely inaccurate
    got = float(O.loss_gap(W, O.problem_data(prob), "logistic"))
    assert got == pytest.approx(gap_ref, rel=1e-11)
    # the plain L − L* has no digits left
    assert (
        abs(O.loss_infimum(prob) - float(model.risk(W, O.problem_data(prob), "linear", "logistic")))
        < 1e-15
    )


def test_quadratic_head_is_exact_in_saturation_too():
    prob = attsvm.random_problem(3, 4, 4, seed=5, head="quadratic", lam=0.3)
    W = 100 * attsvm.solve_att_svm(prob.with_(head="linear", lam=0.0)).W
    G_ref, _ = decimal_reference(prob, W)
    plain, cent = grads(prob, W, "W", "logistic")
    assert srel(cent, G_ref) <= 1e-11 and srel(plain, G_ref) > 0.1


def test_loss_gap_is_positive_and_exact_on_saturated_random_problems():
    """L − L* stays > 0 and exact at gaps ~200, where a γ* off by one ulp (~1e-17) would
    swamp it (seen before γ* was taken from the same γ as the softmax average)."""
    for seed in range(4):
        prob = attsvm.random_problem(6, 8, 10, seed=seed)
        W = 200 * attsvm.solve_att_svm(prob).W
        _, gap_ref = decimal_reference(prob, W)
        got = float(O.loss_gap(W, O.problem_data(prob), "logistic"))
        assert got > 0 and got == pytest.approx(gap_ref, rel=1e-11)
