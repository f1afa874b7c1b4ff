"""attsvm.svm in the norms of the optimizer → bias map (docs/followups.md §5): entrywise ℓp (the
ℓp-AttSVM of mirror descent, arXiv 2410.14581), entrywise ℓ∞ ("max") and spectral.

Optimality, from first principles. For min ‖W‖ s.t. ⟨A_j, W⟩ ≥ 1 the Lagrangian
‖W‖ − Σ_j λ_j (⟨A_j, W⟩ − 1) is bounded below in W iff ‖G‖_dual ≤ 1, G = Σ_j λ_j A_j, and then
its minimum is Σ_j λ_j. So the dual is  max 1ᵀλ  s.t.  λ ≥ 0, ‖G(λ)‖_dual ≤ 1, and (W, λ) is
optimal iff W is feasible, λ is dual feasible and ‖W‖ = Σ_j λ_j (zero gap); complementary
slackness and the alignment ⟨G, W⟩ = ‖W‖ = ‖G‖_dual ‖W‖ follow. Dual norms: ℓp ↔ ℓq
(1/p + 1/q = 1), max (ℓ∞) ↔ entrywise ℓ1, spectral ↔ nuclear — computed here with numpy.

Independent references: the dual problem solved separately in cvxpy (ℓq through cvxpy's
rational SOC approximation, not the power cones the library uses), the primal written
differently (Σ|w|^p epigraph; ℓ∞ as an LP in scipy's HiGHS; spectral as an explicit LMI), and
p = 2 against the Frobenius SVM (solved through its QP dual).

Tolerances: the certificate holds to CERT_TOL = 1e-7 (measured residuals ≲ 1e-9); values of
independent solves agree to VALUE_TOL = 1e-7 relative (measured ≲ 1e-9); the unique solutions
(1 < p < ∞) agree to W_TOL = 2e-5 (measured 2e-6..5e-6: an interior point's W is accurate to about
the square root of its gap, ~1e-10).
"""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest
from reference import rel
from scipy.optimize import linprog
from test_svm import constraint_matrices

import attsvm
from attsvm.svm import SUPPORT_TOL, matrix_norm

CERT_TOL = 1e-7
VALUE_TOL = 1e-7
W_TOL = 2e-5  # an interior point's W is accurate to ~√(gap): measured 2e-6..5e-6 (p ≠ 2)
OK = ("optimal", "optimal_inaccurate")
TIGHT = dict(tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10, max_iter=400)

CASES = [
    ("lp", 1.5),
    ("lp", 3.0),
    ("lp", 1.25),
    ("lp", 4 / 3),
    ("lp", 1.0),
    ("max", None),
    ("spectral", None),
]


def np_norm(W, norm, p=None):
    if norm == "lp":
        return float(np.sum(np.abs(W) ** p) ** (1 / p))
    if norm == "max":
        return float(np.abs(W).max())
    return float(np.linalg.svd(W, compute_uv=False).max())


def np_dual_norm(G, norm, p=None):
    if norm == "lp":
        if p == 1.0:
            return float(np.abs(G).max())
        q = p / (p - 1)
        return float(np.sum(np.abs(G) ** q) ** (1 / q))
    if norm == "max":
        return float(np.abs(G).sum())
    return float(np.linalg.svd(G, compute_uv=False).sum())


def certificate(prob, sol):
    """Residuals of the optimality conditions of `sol` (all ≈ 0 at an optimum)."""
    A, idx = constraint_matrices(prob, sol.alpha)
    ii = tuple(np.array(idx).T)
    duals = sol.duals if sol.duals.ndim == 3 else sol.duals[:, None, :]
    lam = duals[ii]
    marg = np.einsum("mde,de->m", A, sol.W)
    G = np.einsum("m,mde->de", lam, A)
    nW = np_norm(sol.W, sol.norm, sol.p)
    return (
        dict(
            primal=max(0.0, 1 - marg.min()),
            dual_sign=max(0.0, -lam.min()),
            slack=float(np.max(np.abs(lam * (marg - 1)))) / nW,
            dual_norm=np_dual_norm(G, sol.norm, sol.p) - 1,
            gap=abs(lam.sum() - nW) / nW,
            align=abs(np.sum(G * sol.W) - nW) / nW,
        ),
        A,
        ii,
        marg,
    )


def assert_optimal(prob, sol):
    assert sol.feasible and sol.status in OK, sol.status
    res, A, ii, marg = certificate(prob, sol)
    worst = max(res[k] for k in ("primal", "dual_sign", "slack", "gap", "align"))
    assert worst <= CERT_TOL, res
    assert res["dual_norm"] <= CERT_TOL, res
    np.testing.assert_allclose(sol.objective, np_norm(sol.W, sol.norm, sol.p), rtol=1e-12)
    # support tokens are exactly the active constraints, judged in this norm's solution
    active = np.zeros(sol.duals.shape if sol.duals.ndim == 3 else (prob.n, 1, prob.T), bool)
    active[ii] = marg <= 1 + SUPPORT_TOL
    sup = sol.support if sol.support.ndim == 3 else sol.support[:, None, :]
    np.testing.assert_array_equal(sup, active)


def independent_dual_value(A, norm, p):
    """max 1ᵀλ s.t. λ ≥ 0, ‖Σ λ_j A_j‖_dual ≤ 1, written separately from the library."""
    m, d, _ = A.shape
    lam = cp.Variable(m)
    G = cp.reshape(A.reshape(m, -1).T @ lam, (d, d), order="C")
    if norm == "lp":
        dn = (
            cp.norm_inf(cp.vec(G, order="F"))
            if p == 1.0
            else cp.pnorm(cp.vec(G, order="F"), p / (p - 1), approx=True)
        )
    elif norm == "max":
        dn = cp.norm1(cp.vec(G, order="F"))
    else:
        dn = cp.normNuc(G)
    pr = cp.Problem(cp.Maximize(cp.sum(lam)), [lam >= 0, dn <= 1])
    pr.solve(solver="CLARABEL", **TIGHT)
    assert pr.status in OK
    return pr.value


def independent_primal(A, norm, p):
    """(value, W or None) of min ‖W‖ s.t. ⟨A_j, W⟩ ≥ 1 in another formulation."""
    m, d, _ = A.shape
    rows = A.reshape(m, -1)
    if norm == "max":  # LP: min t s.t. −t ≤ w ≤ t, rows w ≥ 1  (HiGHS, no cvxpy)
        nv = d * d
        c = np.r_[np.zeros(nv), 1.0]
        I = np.eye(nv)
        A_ub = np.block(
            [[I, -np.ones((nv, 1))], [-I, -np.ones((nv, 1))], [-rows, np.zeros((m, 1))]]
        )
        b_ub = np.r_[np.zeros(2 * nv), -np.ones(m)]
        res = linprog(c, A_ub=A_ub, b_ub=b_ub, bounds=[(None, None)] * (nv + 1), method="highs")
        assert res.status == 0
        return res.fun, None
    W = cp.Variable((d, d))
    cons = [rows @ cp.vec(W, order="C") >= 1]
    if norm == "lp":  # Σ |w|^p (power atom), then the p-th root
        pr = cp.Problem(cp.Minimize(cp.sum(cp.power(cp.abs(W), p))), cons)
        pr.solve(solver="CLARABEL", **TIGHT)
        return pr.value ** (1 / p), W.value
    t = cp.Variable()  # spectral: [[t I, W], [Wᵀ, t I]] ⪰ 0
    S = cp.Variable((2 * d, 2 * d), symmetric=True)
    cons += [S[:d, :d] == t * np.eye(d), S[d:, d:] == t * np.eye(d), S[:d, d:] == W, S >> 0]
    pr = cp.Problem(cp.Minimize(t), cons)
    pr.solve(solver="CLARABEL", **TIGHT)
    return pr.value, None


# -- optimality and agreement, on problems of every kind ------------------------------------
@pytest.mark.parametrize("norm,p", CASES)
def test_every_norm_satisfies_its_dual_certificate_and_matches_independent_solves(norm, p):
    prob = attsvm.random_problem(4, 5, 6, seed=2)
    sol = attsvm.solve_att_svm(prob, norm=norm, p=p)
    assert_optimal(prob, sol)
    A, _ = constraint_matrices(prob, sol.alpha)
    dual = independent_dual_value(A, norm, p)
    assert abs(dual - sol.objective) <= VALUE_TOL * sol.objective  # strong duality
    val, W = independent_primal(A, norm, p)
    assert abs(val - sol.objective) <= VALUE_TOL * sol.objective
    if norm == "lp" and p > 1:  # unique minimizer
        assert rel(sol.W, W) <= W_TOL


@pytest.mark.parametrize("norm,p", [("lp", 1.5), ("max", None), ("spectral", None)])
@pytest.mark.parametrize("case", ["self", "local-alpha", "sequence", "causal"])
def test_certificate_holds_for_every_problem_kind(case, norm, p):
    if case in ("sequence", "causal"):
        prob, alpha = attsvm.random_problem(2, 4, 6, seed=1, queries=case), None
    else:
        prob = attsvm.random_problem(
            4, 5, 6, seed=2, attention="self" if case == "self" else "cross"
        )
        alpha = None if case != "local-alpha" else np.array([1, 3, 0, 4])
    assert_optimal(prob, attsvm.solve_att_svm(prob, alpha, norm=norm, p=p))


@pytest.mark.parametrize("seed", range(3))
def test_l2_svm_is_the_frobenius_svm(seed):
    prob = attsvm.random_problem(5, 6, 5, seed=seed)
    a = attsvm.solve_att_svm(prob, norm="lp", p=2)
    b = attsvm.solve_att_svm(prob, norm="fro")
    assert a.feasible and b.feasible
    assert rel(a.W, b.W) <= 1e-6
    np.testing.assert_allclose(a.objective, b.objective, rtol=1e-8)
    np.testing.assert_array_equal(a.support, b.support)


def test_lp_norms_order_and_interpolate():
    """‖W‖_p is non-increasing in p, so the optimal ℓp values are too (a feasible W for one p
    is feasible for all); the p → ∞ and p = 1 ends meet the max-norm and ℓ1 solutions."""
    prob = attsvm.random_problem(4, 5, 6, seed=3)
    vals = [
        attsvm.solve_att_svm(prob, norm="lp", p=p).objective
        for p in (1.0, 1.25, 1.5, 2.0, 3.0, 8.0, 64.0)
    ]
    assert all(a >= b * (1 - 1e-9) for a, b in zip(vals, vals[1:], strict=False))
    vmax = attsvm.solve_att_svm(prob, norm="max").objective
    assert vals[-1] >= vmax and vals[-1] <= vmax * (prob.d**2) ** (1 / 64)


def test_infeasible_selection_is_a_result_in_every_norm():
    prob = attsvm.random_problem(2, 3, 2, seed=0)
    X = prob.X.copy()
    X[0, 1] = X[0, 0]  # token 1 equals the selected token 0
    bad = prob.with_(X=X)
    for norm, p in CASES:
        sol = attsvm.solve_att_svm(bad, np.array([0, 0]), norm=norm, p=p)
        assert not sol.feasible and sol.W is None and sol.p == p


def test_local_optimality_uses_each_norms_support_set():
    """classify_selection / locally_optimal_selections judge α with the SVM of the norm asked
    for: every enumerated status equals the rule applied to that norm's own solution."""
    prob = attsvm.random_problem(2, 3, 3, seed=4)
    g = attsvm.token_scores(prob)
    for norm, p in [("lp", 1.5), ("max", None)]:
        table = attsvm.locally_optimal_selections(prob, norm=norm, p=p)
        for row in table:
            alpha = np.array(row["alpha"])
            sol = attsvm.solve_att_svm(prob, alpha, norm=norm, p=p)
            if not sol.feasible:
                assert row["status"] == "infeasible"
                continue
            sel = g[np.arange(prob.n), alpha][:, None]
            local = bool(np.all(~sol.support | (g < sel)))
            assert (row["status"] in ("global", "local")) == local
            assert attsvm.classify_selection(prob, alpha, norm=norm, p=p) == row["status"]
            assert attsvm.is_locally_optimal(prob, alpha, norm=norm, p=p) == local


@pytest.mark.parametrize(
    "kw,match",
    [
        (dict(norm="lp"), "`p` must be given"),
        (dict(norm="lp", p=0.5), "`p` must be"),
        (dict(norm="lp", p=float("inf")), "`p` must be"),
        (dict(norm="lp", p=float("nan")), "`p` must be"),
        (dict(norm="fro", p=2), "`p` must be None unless"),
        (dict(norm="max", p=3), "`p` must be None unless"),
        (dict(norm="l3"), "`norm` must be"),
    ],
)
def test_bad_norm_arguments_are_rejected(kw, match):
    prob = attsvm.random_problem(2, 3, 3, seed=0)
    with pytest.raises(ValueError, match=match):
        attsvm.solve_att_svm(prob, **kw)


def test_matrix_norm_matches_numpy_and_does_not_overflow():
    W = np.random.default_rng(0).standard_normal((4, 5))
    for p in (1.0, 1.5, 3.0):
        np.testing.assert_allclose(matrix_norm(W, "lp", p), np_norm(W, "lp", p), rtol=1e-13)
    np.testing.assert_allclose(matrix_norm(W, "spectral"), np.linalg.norm(W, 2), rtol=1e-13)
    np.testing.assert_allclose(
        matrix_norm(1e300 * W, "lp", 3.0), 1e300 * np_norm(W, "lp", 3.0), rtol=1e-13
    )


def test_the_norm_changes_which_selections_are_locally_optimal():
    """random_problem(2, 3, 3, seed=7), α = (0, 1): locally optimal for the Frobenius SVM, but
    the ℓ1.25 SVM at α has a support token scoring above the selected one."""
    prob = attsvm.random_problem(2, 3, 3, seed=7)
    alpha = np.array([0, 1])
    assert attsvm.classify_selection(prob, alpha, norm="fro") == "local"
    assert attsvm.classify_selection(prob, alpha, norm="lp", p=1.25) == "feasible"
    sol = attsvm.solve_att_svm(prob, alpha, norm="lp", p=1.25)
    g = attsvm.token_scores(prob)
    assert np.any(sol.support & (g > g[np.arange(2), alpha][:, None]))
