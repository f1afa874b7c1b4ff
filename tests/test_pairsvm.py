"""attsvm.pairsvm: the pair-constraint SVMs against an independent cvxpy primal, an LP
feasibility test (HiGHS), and their certificates recomputed here from W and the duals.

Reference: min ‖W‖ (Frobenius, nuclear) s.t. Σ_ab D_ja W_ab z_b ≥ 1 written as a primal in
cvxpy on the full (d, d2) matrix (no reduction, no dual), solved by Clarabel at tight
tolerances; feasibility decided by a linear program in scipy's HiGHS.
"""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest
from scipy.optimize import linprog

import attsvm
from attsvm import pairsvm
from attsvm.svm import problem_pairs, problem_tokens

TIGHT = dict(tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10, max_iter=400)


def planted(m, d, d2, q, seed, *, flip=0):
    """Constraints separated by a random W0 (feasible), with `flip` of them sign-flipped
    (then usually infeasible)."""
    rng = np.random.default_rng(seed)
    D = rng.standard_normal((m, d))
    Z = rng.standard_normal((q, d2))
    query = rng.integers(0, q, m)
    W0 = rng.standard_normal((d, d2))
    s = np.sign(np.einsum("jd,de,je->j", D, W0, Z[query]))
    s[:flip] *= -1
    return D * s[:, None], Z, query


def primal_reference(D, Z, query, norm):
    """(value, W) of min ‖W‖ s.t. D_jᵀ W z_{k(j)} ≥ 1 by cvxpy, or (None, None) if not optimal."""
    W = cp.Variable((D.shape[1], Z.shape[1]))
    marg = cp.sum(cp.multiply(D @ W, Z[query]), axis=1)
    obj = cp.sum_squares(W) if norm == "fro" else cp.normNuc(W)
    prob = cp.Problem(cp.Minimize(obj), [marg >= 1])
    prob.solve(solver="CLARABEL", **TIGHT)
    if prob.status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE):
        return None, None
    return (np.sqrt(prob.value) if norm == "fro" else prob.value), W.value


def lp_feasible(D, Z, query):
    rows = np.einsum("ja,jb->jab", D, Z[query]).reshape(len(D), -1)
    res = linprog(
        np.zeros(rows.shape[1]),
        A_ub=-rows,
        b_ub=-np.ones(len(D)),
        bounds=[(None, None)] * rows.shape[1],
        method="highs",
    )
    return res.status == 0


def check_certificate(sol, D, Z, query, *, gap_tol, res_tol=1e-6):
    """Recompute the certificate from W and λ with plain loops over the constraints."""
    W, lam = sol.W, sol.duals
    B = sum(lam[j] * np.outer(D[j], Z[query[j]]) for j in range(len(D)))
    marg = np.array([D[j] @ W @ Z[query[j]] for j in range(len(D))])
    mu = marg.min()
    assert lam.min() >= 0
    assert mu >= 1 - 1e-9
    assert sol.min_margin == pytest.approx(mu, rel=1e-12)
    if sol.norm == "fro":
        assert np.linalg.norm(W - B) <= res_tol * np.linalg.norm(W)
        primal = 0.5 * np.sum(W * W) / mu**2
        dual = lam.sum() - 0.5 * np.sum(B * B)
    else:
        s1 = np.linalg.svd(B, compute_uv=False)[0]
        assert s1 <= 1 + res_tol
        primal = np.linalg.svd(W, compute_uv=False).sum() / mu
        dual = lam.sum() / max(1.0, s1)
    gap = (primal - dual) / primal
    assert -1e-12 <= gap <= gap_tol
    assert sol.gap == pytest.approx(gap, abs=1e-12)


SHAPES = [(12, 3, 4, 3), (30, 5, 5, 6), (40, 6, 3, 4), (80, 8, 10, 8), (25, 2, 2, 6)]


@pytest.mark.parametrize("solver", ["auto", "CLARABEL", "ldp", "ws", "wsnewton", "newton"])
@pytest.mark.parametrize("shape", SHAPES)
def test_frobenius_agrees_with_the_primal(shape, solver):
    D, Z, query = planted(*shape, seed=sum(shape))
    sol = pairsvm.solve_pairs(D, Z, query, "fro", solver=solver)
    val, W = primal_reference(D, Z, query, "fro")
    assert sol.feasible and val is not None
    assert sol.W.shape == (shape[1], shape[2])
    assert np.linalg.norm(sol.W - W) <= 1e-6 * np.linalg.norm(W)
    check_certificate(sol, D, Z, query, gap_tol=1e-10)


@pytest.mark.parametrize("solver", ["auto", "CLARABEL", "alm"])
@pytest.mark.parametrize("shape", SHAPES[:4])
def test_nuclear_agrees_with_the_primal(shape, solver):
    D, Z, query = planted(*shape, seed=sum(shape) + 1)
    sol = pairsvm.solve_pairs(D, Z, query, "nuc", solver=solver)
    val, _ = primal_reference(D, Z, query, "nuc")
    assert sol.feasible and val is not None
    assert sol.objective == pytest.approx(val, rel=1e-6)
    check_certificate(sol, D, Z, query, gap_tol=1e-6)


@pytest.mark.parametrize("norm", ["fro", "nuc"])
@pytest.mark.parametrize("seed", range(4))
def test_feasibility_decisions_match_an_lp(norm, seed):
    D, Z, query = planted(30, 3, 4, 5, seed, flip=seed)  # seed 0: feasible
    sol = pairsvm.solve_pairs(D, Z, query, norm)
    assert sol.feasible == lp_feasible(D, Z, query)
    if not sol.feasible:
        assert sol.W is None and sol.reason
        if sol.farkas is not None:  # a Farkas certificate: μ ≥ 0, Σ μ = 1, Σ μ_j A_j = 0
            mu = sol.farkas
            B = np.einsum("j,ja,jb->ab", mu, D, Z[query])
            assert mu.min() >= 0 and mu.sum() == pytest.approx(1.0)
            assert np.linalg.norm(B) <= 1e-9 * np.abs(D).max() * np.abs(Z).max()


def test_a_zero_constraint_is_infeasible_with_its_reason():
    D, Z, query = planted(10, 3, 3, 2, 0)
    D[4] = 0.0
    for norm in ("fro", "nuc"):
        sol = pairsvm.solve_pairs(D, Z, query, norm)
        assert not sol.feasible and "constraint 4" in sol.reason
        assert sol.farkas[4] == 1.0


def test_no_constraints_give_zero():
    sol = pairsvm.solve_pairs(np.zeros((0, 3)), np.ones((1, 2)), np.zeros(0, int))
    assert sol.feasible and sol.objective == 0.0 and sol.W.shape == (3, 2)


def test_bad_inputs_are_refused():
    D, Z, query = planted(10, 3, 3, 2, 0)
    with pytest.raises(ValueError, match="norm"):
        pairsvm.solve_pairs(D, Z, query, "max")
    with pytest.raises(ValueError, match="query"):
        pairsvm.solve_pairs(D, Z, query + 5)
    with pytest.raises(ValueError, match="finite"):
        pairsvm.solve_pairs(D * np.nan, Z, query)


# -- attention problems (attsvm.svm's constraints) -------------------------------------------
ATTENTION = [
    ((4, 5, 6), "single"),
    ((8, 8, 10), "single"),
    ((3, 4, 5), "sequence"),
    ((4, 5, 6), "causal"),
    ((8, 8, 10), "sequence"),
]


@pytest.mark.parametrize("norm", ["fro", "nuc"])
@pytest.mark.parametrize(("shape", "queries"), ATTENTION)
def test_attention_svms_agree_with_the_primal(shape, queries, norm):
    """solve_att_svm through attsvm.pairsvm (solver="pairs") against the cvxpy primal:
    the same feasibility decision (and the LP's), W to 1e-6 (Frobenius), value to 1e-6
    (nuclear), and the certificate."""
    prob = attsvm.random_problem(*shape, seed=1, queries=queries)
    alpha = attsvm.problems.optimal_tokens(prob)
    D, Z, query, _ = problem_pairs(prob, alpha)
    sol = attsvm.solve_att_svm(prob, alpha, norm, solver="pairs")
    val, W = primal_reference(D, Z, query, norm)
    assert sol.feasible == (val is not None) == lp_feasible(D, Z, query)
    if not sol.feasible:
        return
    if norm == "fro":
        assert np.linalg.norm(sol.W - W) <= 1e-6 * np.linalg.norm(W)
    assert sol.objective == pytest.approx(val, rel=1e-6)
    ps = pairsvm.solve_pairs(D, Z, query, norm)
    check_certificate(ps, D, Z, query, gap_tol=1e-10 if norm == "fro" else 1e-6)


@pytest.mark.parametrize("norm", ["fro", "nuc"])
def test_certificates_at_a_moderate_size(norm):
    """(24, 24, 32), 552 constraints: Newton (Frobenius, gap ≤ 1e-10) and the ALM (nuclear,
    gap ≤ 1e-6) with certificates recomputed here by plain loops."""
    prob = attsvm.random_problem(24, 24, 32, seed=0)
    D, Z, query, _ = problem_pairs(prob, attsvm.problems.optimal_tokens(prob))
    sol = pairsvm.solve_pairs(D, Z, query, norm, solver="newton" if norm == "fro" else "alm")
    assert sol.feasible and sol.solver == ("newton" if norm == "fro" else "alm")
    check_certificate(sol, D, Z, query, gap_tol=1e-10 if norm == "fro" else 1e-6)


def test_newton_on_a_rectangular_problem_matches_the_exact_ldp():
    D, Z, query = planted(400, 12, 7, 30, 3)
    new = pairsvm.solve_pairs(D, Z, query, solver="newton")
    ldp = pairsvm.solve_pairs(D, Z, query, solver="ldp")
    assert new.W.shape == (12, 7)
    assert np.linalg.norm(new.W - ldp.W) <= 1e-8 * np.linalg.norm(ldp.W)
    check_certificate(new, D, Z, query, gap_tol=1e-10)


def test_small_d_and_infeasible_data_go_to_the_exact_method():
    """d² ≪ m and T − 1 > d: the LDP, exact, both ways (LP as the judge)."""
    for seed in range(3):
        prob = attsvm.random_problem(10, 12, 2, seed=seed)
        D, Z, query, _ = problem_pairs(prob, attsvm.problems.optimal_tokens(prob))
        sol = pairsvm.solve_pairs(D, Z, query)
        assert sol.solver in ("ldp", "check")
        assert sol.feasible == lp_feasible(D, Z, query)
        if sol.feasible:
            check_certificate(sol, D, Z, query, gap_tol=1e-10)


def low_rank(T, d, rank, seed):
    """Layer-0-shaped constraints: T tokens of rank `rank` in R^d, queries [x; 1], each query
    selecting its previous token, every constraint twice (duplicates)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((T, rank)) @ rng.standard_normal((rank, d))
    Z = np.concatenate([X, np.ones((T, 1))], axis=1)
    D = np.concatenate([X[t - 1] - np.delete(X, t - 1, axis=0) for t in range(1, T)])
    query = np.repeat(np.arange(1, T), T - 1)
    return np.concatenate([D, D]), Z, np.concatenate([query, query])


@pytest.mark.parametrize("solver", ["ws", "wsnewton", "newton"])
def test_low_rank_inputs_with_duplicates_agree_with_the_primal(solver):
    D, Z, query = low_rank(12, 16, 10, seed=3)
    sol = pairsvm.solve_pairs(D, Z, query, "fro", solver=solver)
    val, W = primal_reference(D, Z, query, "fro")
    assert sol.feasible and val is not None
    assert np.linalg.norm(sol.W - W) <= 1e-6 * np.linalg.norm(W)
    check_certificate(sol, D, Z, query, gap_tol=1e-10)


@pytest.mark.parametrize("seed", range(3))
def test_the_gram_form_ldp_matches_lawson_hanson_on_near_singular_grams(seed):
    """`_ldp_gram` (projected Newton + the block Lawson–Hanson finish, from the Gram alone)
    against Lawson–Hanson's NNLS on the rows, on duplicated low-rank constraints whose Gram
    is singular: the same W to 1e-8, λ ≥ 0 with W = Σ λ_j A_j, and its certificate."""
    D, Z, query = low_rank(10 + 2 * seed, 14, 6, seed=seed)
    P = pairsvm.Pairs(D, Z, query)
    K = P.gram_matrix()
    assert np.linalg.matrix_rank(K) < P.m
    lam, status, _ = pairsvm._ldp_gram(K)
    ref = pairsvm.solve_pairs(D, Z, query, "fro", solver="ldp")
    assert status == "optimal" and ref.feasible
    W = P.combine(lam)
    assert np.linalg.norm(W - ref.W) <= 1e-8 * np.linalg.norm(ref.W)
    check_certificate(pairsvm._solution(P, W, lam, "fro", "ws"), D, Z, query, gap_tol=1e-10)


@pytest.mark.parametrize("seed", range(2, 5))
def test_the_gram_form_ldp_finds_farkas_certificates(seed):
    D, Z, query = planted(30, 3, 4, 5, seed, flip=seed)
    assert not lp_feasible(D, Z, query)
    _, status, mu = pairsvm._ldp_gram(pairsvm.Pairs(D, Z, query).gram_matrix())
    assert status == "infeasible"
    B = np.einsum("j,ja,jb->ab", mu, D, Z[query])
    assert mu.min() >= 0 and mu.sum() == pytest.approx(1.0)
    assert np.linalg.norm(B) <= 1e-8 * np.abs(D).max() * np.abs(Z).max()
    sol = pairsvm.solve_pairs(D, Z, query, "fro", solver="ws")
    assert not sol.feasible and sol.farkas is not None


@pytest.mark.parametrize("seed", [0, 1, 5])
def test_the_working_set_newton_decides_infeasible_data_on_its_working_set(seed):
    """Every token a query, T − 1 > d: infeasible. Where the dual Newton does not certify a
    working set, its bounded form finds a Farkas vector on S, which is one for all m (zero
    outside S), agreeing with the exact LDP and the LP."""
    prob = attsvm.random_problem(6, 10, 4, seed=seed, queries="sequence")
    D, Z, query, _ = problem_pairs(prob, attsvm.problems.optimal_tokens(prob))
    sol = pairsvm.solve_pairs(D, Z, query, "fro", solver="wsnewton")
    assert not sol.feasible and sol.solver == "wsnewton" and "Farkas" in sol.reason
    assert not lp_feasible(D, Z, query)
    assert not pairsvm.solve_pairs(D, Z, query, "fro", solver="ldp").feasible
    mu = sol.farkas
    B = np.einsum("j,ja,jb->ab", mu, D, Z[query])
    assert mu.min() >= 0 and mu.sum() == pytest.approx(1.0) and (mu > 0).sum() < len(D)
    assert np.linalg.norm(B) <= 1e-8 * np.abs(D).max() * np.abs(Z).max()


@pytest.mark.parametrize("queries, n, T, d", [("sequence", 8, 8, 16), ("single", 12, 12, 16)])
def test_newton_on_the_nuclear_kkt_conditions_certifies_what_the_alm_leaves_near_1e_6(
    monkeypatch, queries, n, T, d
):
    """The ALM stalls near a gap of 2e-6 on these (its subspaces are exact only to ~1e-5);
    Newton on the optimality conditions from there certifies to 1e-10 or better, with the
    cvxpy primal's value."""
    prob = attsvm.random_problem(n, T, d, seed=0, queries=queries)
    D, Z, query, _ = problem_pairs(prob, attsvm.problems.optimal_tokens(prob))
    sol = pairsvm.solve_pairs(D, Z, query, "nuc", solver="alm")
    assert sol.status == "optimal" and sol.solver == "alm"
    check_certificate(sol, D, Z, query, gap_tol=1e-10, res_tol=1e-12)
    val, _ = primal_reference(D, Z, query, "nuc")
    assert sol.objective / sol.min_margin == pytest.approx(val, rel=1e-7)
    monkeypatch.setattr(pairsvm, "_nuc_kkt", lambda *a, **k: None)
    alone = pairsvm.solve_pairs(D, Z, query, "nuc", solver="alm")
    assert alone.gap > 1e-7  # the ALM alone: what Newton improved


@pytest.mark.parametrize("singular", [False, True])
def test_minres_solves_symmetric_indefinite_systems_like_a_dense_solve(singular):
    """`_minres`, plain and preconditioned (SPD), against numpy's least-squares solution on a
    random symmetric indefinite system (singular and consistent: the minimum-norm one)."""
    rng = np.random.default_rng(3)
    n = 120
    Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    ev = rng.uniform(0.5, 3.0, n) * rng.choice([-1.0, 1.0], n)
    if singular:
        ev[:7] = 0.0
    A = Q @ np.diag(ev) @ Q.T
    b = A @ rng.standard_normal(n)
    ref = np.linalg.lstsq(A, b, rcond=1e-10)[0]
    d = rng.uniform(0.5, 2.0, n)
    for prec in (None, lambda v: v / d):
        x, it = pairsvm._minres(lambda v: A @ v, b, 1e-12, 10 * n, prec)
        assert 0 < it < 10 * n
        assert np.linalg.norm(A @ x - b) <= 1e-10 * np.linalg.norm(b)
        if prec is None:  # from x = 0 the Krylov iterates stay in range(A): minimum norm
            assert np.linalg.norm(x - ref) <= 1e-8 * np.linalg.norm(ref)


def test_the_nuclear_kkt_jacobian_matches_finite_differences_and_is_symmetric():
    """`_KKTSystem.op` is the derivative of `_KKTSystem.residual` (central differences) and
    symmetric; its preconditioner is the inverse of C Cᵀ on the multipliers' block."""
    rng = np.random.default_rng(5)
    D, Z, query = planted(40, 6, 5, 4, seed=5)
    P = pairsvm.Pairs(D, Z, query)
    S = np.arange(0, 40, 3)
    U, V = rng.standard_normal((6, 2)), rng.standard_normal((5, 2))
    sysm = pairsvm._KKTSystem(P, S, U, V, rng.uniform(0.1, 1.0, S.size))
    n = sysm.nU + sysm.nV + S.size
    x, y = rng.standard_normal(n), rng.standard_normal(n)
    h = 1e-6
    fd = (sysm.step(h * x).residual() - sysm.step(-h * x).residual()) / (2 * h)
    assert np.linalg.norm(sysm.op(x) - fd) <= 1e-8 * np.linalg.norm(fd)
    assert x @ sysm.op(y) == pytest.approx(y @ sysm.op(x), rel=1e-12)
    J = np.stack([sysm.op(e) for e in np.eye(n)], axis=1)
    C = -J[sysm.nU + sysm.nV :, : sysm.nU + sysm.nV]
    lam_part = np.zeros(n)
    lam_part[sysm.nU + sysm.nV :] = rng.standard_normal(S.size)
    got = sysm.preconditioner()(lam_part)[sysm.nU + sysm.nV :]
    want = np.linalg.solve(C @ C.T, lam_part[sysm.nU + sysm.nV :])
    assert np.linalg.norm(got - want) <= 1e-8 * np.linalg.norm(want)


def test_the_nuclear_kkt_correction_grows_a_rank_that_was_too_small():
    """`_kkt_correct` at the optimal W with its smallest singular direction removed and the
    duals scaled by 1.02 (so B(λ) has five singular values 1.02, four of them along U):
    it adds the one direction W lacks, of norm √(0.02·scale), and nothing else."""
    prob = attsvm.random_problem(12, 12, 16, seed=0)
    D, Z, query, _ = problem_pairs(prob, attsvm.problems.optimal_tokens(prob))
    P = pairsvm.Pairs(D, Z, query)
    sol = pairsvm.solve_pairs(D, Z, query, "nuc", solver="alm")
    Uw, s, Vt = np.linalg.svd(sol.W)
    r = int((s > 1e-8 * s[0]).sum())
    assert r >= 2 and sol.gap <= 1e-10
    U, V = Uw[:, : r - 1] * np.sqrt(s[: r - 1]), Vt[: r - 1].T * np.sqrt(s[: r - 1])
    S = np.flatnonzero(sol.duals > 0)
    sysm = pairsvm._KKTSystem(P, S, U, V, 1.02 * sol.duals[S])
    nxt = pairsvm._kkt_correct(sysm, scale=1.0)
    assert nxt is not None and nxt.U.shape[1] == r and set(nxt.S) >= set(S)
    new_u, new_v = nxt.U[:, -1], nxt.V[:, -1]
    assert np.linalg.norm(new_u) == pytest.approx(np.sqrt(0.02), rel=1e-6)
    assert np.linalg.norm(new_v) == pytest.approx(np.sqrt(0.02), rel=1e-6)
    for old, grown, lacking in ((U, nxt.U, Uw[:, r - 1]), (V, nxt.V, Vt[r - 1])):
        Q = np.linalg.qr(grown)[0]  # B's top singular value is five-fold: any basis of it
        assert np.linalg.norm(lacking - Q @ (Q.T @ lacking)) <= 1e-8
        assert np.allclose(grown[:, : r - 1], old)
    full = pairsvm._KKTSystem(
        P, S, Uw[:, :r] * np.sqrt(s[:r]), Vt[:r].T * np.sqrt(s[:r]), sol.duals[S]
    )
    assert pairsvm._kkt_correct(full, scale=1.0) is None  # the optimum: nothing to change


def test_the_working_set_grows_over_rounds_on_low_rank_inputs():
    """A layer-0-shaped problem large enough that "ws" takes several rounds, warm-started:
    against the cvxpy primal."""
    D, Z, query = low_rank(40, 24, 12, seed=7)
    sol = pairsvm.solve_pairs(D, Z, query, "fro", solver="ws")
    val, W = primal_reference(D, Z, query, "fro")
    assert sol.feasible and val is not None and sol.solver == "ws"
    assert (sol.duals > 0).sum() > 40  # more than the first round's one member per query
    assert np.linalg.norm(sol.W - W) <= 1e-6 * np.linalg.norm(W)
    check_certificate(sol, D, Z, query, gap_tol=1e-10)


@pytest.mark.parametrize("seed", range(2))
def test_working_set_newton_on_sequence_problems_agrees_with_the_primal(seed):
    """m ≫ d·d2 (every token a query): Newton on a growing working set against the cvxpy
    primal, W to 1e-6 and the certificate on all constraints."""
    prob = attsvm.random_problem(6, 10, 4, seed=seed, queries="sequence")
    D, Z, query, _ = problem_pairs(prob, attsvm.problems.optimal_tokens(prob))
    assert pairsvm.pick_solver(len(D), 4, 4, len(Z), "fro") != "newton"
    sol = pairsvm.solve_pairs(D, Z, query, "fro", solver="wsnewton")
    val, W = primal_reference(D, Z, query, "fro")
    assert sol.feasible == (val is not None) == lp_feasible(D, Z, query)
    if sol.feasible:
        assert np.linalg.norm(sol.W - W) <= 1e-6 * np.linalg.norm(W)
        check_certificate(sol, D, Z, query, gap_tol=1e-10)


def test_the_working_sets_top_up_does_not_change_the_answer(monkeypatch):
    """The "wsnewton" working set over several rounds (m = 4,560 from 480 first members):
    topped up with near-active non-members (WS_NEAR) and with violated ones only, the same
    certified W."""
    prob = attsvm.random_problem(12, 20, 32, seed=3, queries="sequence")
    D, Z, query, _ = problem_pairs(prob, attsvm.problems.optimal_tokens(prob))
    rounds = []
    inner = pairsvm._fro_newton

    def counted(P, **kw):
        rounds.append(P.m)
        return inner(P, **kw)

    monkeypatch.setattr(pairsvm, "_fro_newton", counted)
    near = pairsvm.solve_pairs(D, Z, query, "fro", solver="wsnewton")
    monkeypatch.setattr(pairsvm, "WS_NEAR", 0.0)
    plain = pairsvm.solve_pairs(D, Z, query, "fro", solver="wsnewton")
    assert len(rounds) > 4 and max(rounds) < len(D)  # several rounds, never all constraints
    assert near.feasible and plain.feasible
    assert np.linalg.norm(near.W - plain.W) <= 1e-9 * np.linalg.norm(plain.W)
    check_certificate(near, D, Z, query, gap_tol=1e-10)


TOKEN_FORMS = [((5, 6, 4), "single", None), ((4, 7, 3), "sequence", None)]
TOKEN_FORMS += [((4, 7, 3), "causal", None), ((5, 6, 4), "single", [6, 3, 5, 2, 6])]


@pytest.mark.parametrize(("shape", "queries", "lengths"), TOKEN_FORMS)
def test_token_form_products_match_plain_loops(shape, queries, lengths):
    """Tokens' margins and Σ λ_j A_j (from the (n, T, d) keys) against loops over the D rows,
    padding included (its tokens are in no constraint)."""
    prob = attsvm.random_problem(*shape, seed=2, queries=queries)
    if lengths is not None:
        prob = prob.with_(lengths=np.array(lengths))
    alpha = attsvm.problems.optimal_tokens(prob)
    D, Z, query, idx = problem_pairs(prob, alpha)
    P = pairsvm.Pairs(D, Z, query, problem_tokens(prob, alpha, idx))
    rng = np.random.default_rng(0)
    W = rng.standard_normal((prob.d, prob.d))
    lam = rng.random(len(D))
    marg = np.array([D[j] @ W @ Z[query[j]] for j in range(len(D))])
    B = sum(lam[j] * np.outer(D[j], Z[query[j]]) for j in range(len(D)))
    assert np.allclose(P.margins(W), marg, rtol=1e-12, atol=1e-12)
    assert np.allclose(P.combine(lam), B, rtol=1e-12, atol=1e-12)
    S = np.flatnonzero(rng.random(len(D)) < 0.5)
    assert np.allclose(P.subset(S).margins(W), marg[S], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("solver", ["newton", "wsnewton"])
def test_the_token_form_gives_the_same_solution(solver):
    prob = attsvm.random_problem(6, 8, 12, seed=0, queries="sequence")
    alpha = attsvm.problems.optimal_tokens(prob)
    D, Z, query, idx = problem_pairs(prob, alpha)
    plain = pairsvm.solve_pairs(D, Z, query, "fro", solver=solver)
    tok = pairsvm.solve_pairs(
        D, Z, query, "fro", solver=solver, tokens=problem_tokens(prob, alpha, idx)
    )
    assert plain.feasible and tok.feasible
    assert np.linalg.norm(tok.W - plain.W) <= 1e-9 * np.linalg.norm(plain.W)
    check_certificate(tok, D, Z, query, gap_tol=1e-10)


def test_tokens_that_do_not_describe_the_constraints_are_refused():
    prob = attsvm.random_problem(4, 5, 3, seed=0, queries="sequence")
    alpha = attsvm.problems.optimal_tokens(prob)
    D, Z, query, idx = problem_pairs(prob, alpha)
    tokens = problem_tokens(prob, alpha, idx)
    bad = [
        pairsvm.Tokens(tokens.X, tokens.alpha, tokens.flat[::-1]),
        pairsvm.Tokens(tokens.X + 1e-9, tokens.alpha, tokens.flat),
        pairsvm.Tokens(tokens.X, tokens.alpha[:, :-1], tokens.flat),
        pairsvm.Tokens(tokens.X, tokens.alpha, tokens.flat + 10**6),
    ]
    for t in bad:
        with pytest.raises(ValueError, match="tokens"):
            pairsvm.solve_pairs(D, Z, query, tokens=t)
