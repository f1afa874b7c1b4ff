"""attsvm.metrics: correlation, token margins, numerical rank, norm growth (docs/theory.md §A.2)."""

from __future__ import annotations

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import attsvm
from attsvm import metrics

mat = hnp.arrays(np.float64, (3, 3), elements=st.floats(-1e3, 1e3))
scale = st.floats(1e-3, 1e3)
PROB = attsvm.random_problem(3, 4, 3, seed=0)


# -- correlation -------------------------------------------------------------------------------
@given(A=mat, B=mat, a=scale, b=scale)
def test_correlation_is_bounded_symmetric_and_scale_invariant(A, B, a, b):
    assume(np.linalg.norm(A) > 1e-3 and np.linalg.norm(B) > 1e-3)
    c = attsvm.correlation(A, B)
    assert isinstance(c, float) and -1.0 <= c <= 1.0
    assert c == pytest.approx(attsvm.correlation(B, A), abs=1e-12)
    assert attsvm.correlation(a * A, b * B) == pytest.approx(c, abs=1e-9)
    assert attsvm.correlation(-A, B) == pytest.approx(-c, abs=1e-12)


@given(A=mat, a=scale)
def test_correlation_of_a_matrix_with_its_multiple_is_one(A, a):
    assume(np.linalg.norm(A) > 1e-3)
    assert attsvm.correlation(A, a * A) == pytest.approx(1.0, abs=1e-12)


def test_correlation_matches_its_formula_and_stacks():
    rng = np.random.default_rng(0)
    A, B = rng.standard_normal((5, 4, 4)), rng.standard_normal((4, 4))
    want = np.sum(A * B, (1, 2)) / (np.linalg.norm(A, axis=(1, 2)) * np.linalg.norm(B))
    np.testing.assert_allclose(attsvm.correlation(A, B), want, rtol=1e-14)
    A[2] = 0.0  # a zero matrix inside a stack: NaN
    c = attsvm.correlation(A, B)
    assert np.isnan(c[2]) and np.all(np.isfinite(np.delete(c, 2)))


# -- margins -------------------------------------------------------------------------------------
@given(W=mat, a=scale)
def test_normalized_margins_are_scale_invariant(W, a):
    assume(np.linalg.norm(W) > 1e-3)
    m1 = metrics.token_margins(PROB, W, normalized=True)
    m2 = metrics.token_margins(PROB, a * W, normalized=True)
    np.testing.assert_allclose(m1, m2, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(
        metrics.token_margins(PROB, a * W), a * metrics.token_margins(PROB, W), rtol=1e-9, atol=1e-9
    )


@given(
    W=mat,
    alpha=hnp.arrays(np.int64, (3,), elements=st.integers(0, 3)),
    beta=hnp.arrays(np.int64, (3,), elements=st.integers(0, 3)),
)
def test_margins_are_antisymmetric_between_selections(W, alpha, beta):
    """margin_α(t) = a_iα − a_it, so margin_α(β_i) = −margin_β(α_i), 0 at the selection."""
    ma = metrics.token_margins(PROB, W, alpha)
    mb = metrics.token_margins(PROB, W, beta)
    i = np.arange(3)
    np.testing.assert_allclose(ma[i, beta], -mb[i, alpha], rtol=1e-12, atol=1e-9)
    assert np.all(ma[i, alpha] == 0)
    logits = np.einsum("ntd,de,ne->nt", PROB.X, W, PROB.Z)
    np.testing.assert_allclose(ma, logits[i, alpha][:, None] - logits, rtol=1e-12, atol=1e-9)


def test_margins_of_the_svm_solution_are_at_least_one():
    sol = attsvm.solve_att_svm(PROB)
    m = metrics.token_margins(PROB, sol.W)
    m[np.arange(3), sol.alpha] = np.inf
    assert m.min() == pytest.approx(1.0, abs=1e-7)
    nm = metrics.token_margins(PROB, sol.W, normalized=True)
    nm[np.arange(3), sol.alpha] = np.inf
    assert nm.min() == pytest.approx(1 / np.linalg.norm(sol.W), rel=1e-7)  # the SVM margin


def test_margins_of_a_stack_and_of_causal_problems():
    W = np.random.default_rng(1).standard_normal((4, 3, 3))
    stack = metrics.token_margins(PROB, W)
    assert stack.shape == (4, 3, 4)
    np.testing.assert_allclose(stack[2], metrics.token_margins(PROB, W[2]), rtol=1e-14)
    causal = attsvm.random_problem(2, 3, 3, seed=0, queries="causal")
    m = metrics.token_margins(causal, W[0])
    assert m.shape == (2, 3, 3) and np.all(np.isnan(m[:, 0, 1:]))


# -- rank and norms ------------------------------------------------------------------------------
def test_numerical_rank_uses_a_relative_threshold():
    U, _ = np.linalg.qr(np.random.default_rng(0).standard_normal((6, 6)))
    W = U @ np.diag([1e3, 10, 1, 1e-2, 1e-6, 0]) @ U.T
    assert metrics.numerical_rank(W) == 3  # σ > 1e-4·σ₁ = 0.1: 1e3, 10, 1
    assert metrics.numerical_rank(W, rtol=5e-3) == 2  # σ > 5: 1e3, 10
    assert metrics.numerical_rank(W, rtol=1e-12) == 5  # only the exact 0 is dropped
    assert metrics.numerical_rank(np.zeros((3, 3))) == 0
    np.testing.assert_array_equal(metrics.numerical_rank(np.stack([W, 2 * W])), [3, 3])


def test_norm_growth_is_the_frobenius_norm_per_iterate():
    W = np.random.default_rng(0).standard_normal((5, 3, 3))
    np.testing.assert_allclose(metrics.norm_growth(W), [np.linalg.norm(w) for w in W])
