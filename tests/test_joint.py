"""Joint (v, W) training (train_v) and its SVMs (attsvm.joint; arXiv 2306.13596, 2410.14581).

References: a plain numpy loop written from the formulas (tests/reference_joint.py), the
closed-form MMTS directions (v^mm ∝ (0, 1), p^relax = (1, 0), tight p^opt ∝ (4/3, 1/3)),
KKT certificates of the relaxed SVM computed with numpy, and a second cvxpy formulation
(the Frobenius problem through its dual QP; ℓp through Σ|w|^p, not the ‖·‖_p cone).
Tolerances: step for step 1e-10 relative (measured ≲ 3e-15); KKT residuals 1e-7
(measured ≲ 1e-9); independent solves agree to 2e-5 (an interior point's W is accurate to
about the square root of its gap).
"""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest
from reference_joint import joint_ngd

from attsvm import correlation, optimal_tokens, random_problem, train
from attsvm.experiments.joint_training import preset_run
from attsvm.joint import authors_loop, joint_problem, solve_joint_svm
from attsvm.svm import constraint_rows

STEP_TOL = 1e-10
CERT_TOL = 1e-7
W_TOL = 2e-5


def _cos(a, b):
    a, b = np.ravel(a), np.ravel(b)
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


def _rel(a, b):
    return float(np.max(np.abs(np.asarray(a) - b)) / np.max(np.abs(b)))


# -- the engine against the numpy loop -------------------------------------------------
@pytest.mark.parametrize(
    "optimizer,param,p",
    [("ngd", "W", None), ("gd", "W", None), ("nmd", "W", 1.5), ("ngd", "KQ", None)],
)
def test_train_v_matches_numpy_loop(optimizer, param, p):
    for seed in (0, 1):
        prob = random_problem(4, 3, 3, seed=seed)
        rng = np.random.default_rng(seed + 10)
        init = (
            rng.uniform(-1, 1, (3, 3))
            if param == "W"
            else (rng.uniform(-1, 1, (3, 3)), rng.uniform(-1, 1, (3, 3)))
        )
        v0 = rng.standard_normal(3)
        tr = train(
            prob,
            param=param,
            steps=50,
            lr=0.1,
            init=init,
            train_v=True,
            init_v=v0,
            optimizer=optimizer,
            p=p,
            ridge=0.0 if param == "KQ" else None,
        )
        Ws, vs = joint_ngd(
            prob, init, v0, steps=50, lr=0.1, optimizer=optimizer, param=param, p=p or 2.0
        )
        assert tr.v.shape == (51, 3)
        assert _rel(tr.W, Ws) < STEP_TOL
        assert _rel(tr.v, vs) < STEP_TOL


def test_train_v_batch_records_and_validation():
    probs = [random_problem(4, 3, 3, seed=s) for s in (0, 1)]
    from attsvm import train_batch

    tr = train_batch(probs, steps=10, train_v=True, init_v=[np.zeros(3), np.ones(3)])
    assert tr.v.shape == (2, 11, 3) and np.all(tr.v[0, 0] == 0) and np.all(tr[1].v[0] == 1)
    assert tr[0].final_v.shape == (3,) and tr.settings["train_v"] is True
    assert train(probs[0], steps=5).v is None
    prob = probs[0]
    with pytest.raises(ValueError, match="init_v"):
        train(prob, steps=5, train_v=True, init_v=np.zeros(4))
    with pytest.raises(ValueError, match="init_v"):
        train(prob, steps=5, init_v=np.zeros(3))
    with pytest.raises(ValueError, match="init_v"):
        train(prob, steps=5, train_v=True, init_v=[np.nan, 0, 0])
    with pytest.raises(ValueError, match="optimizer"):
        train(prob, steps=5, train_v=True, optimizer="sign")
    with pytest.raises(ValueError, match="train_v"):
        train(prob, steps=5, train_v="yes")
    with pytest.raises(ValueError, match="train_v"):
        train(random_problem(4, 3, 3, head="relu"), steps=5, train_v=True)


# -- the MMTS presets: the relaxed limit appears ---------------------------------------------
def _p(tr):
    return tr.W[-1][:, 0]  # W z_i with z_i = e₁


def test_mmts_relaxed_and_tight_presets():
    relaxed, tight = joint_problem("mmts-relaxed"), joint_problem("mmts-tight")
    sr = solve_joint_svm(relaxed.prob, [1, 1, 1])
    st = solve_joint_svm(tight.prob, [1, 1, 1])
    assert sr.v_status == sr.W_status == "optimal" and sr.feasible
    # the SVMs: closed forms
    assert np.allclose(sr.v, [0, 1], atol=1e-7) and np.allclose(st.v, [0, 1], atol=1e-7)
    assert sr.support.tolist() == [True, True, False] and st.support.all()
    assert np.allclose(sr.W, [[1, 0], [0, 0]], atol=1e-7)
    assert np.allclose(sr.W_tight, [[1.25, 0], [0.25, 0]], atol=1e-7)
    assert np.allclose(st.W, [[4 / 3, 0], [1 / 3, 0]], atol=1e-7)
    assert np.allclose(st.W_tight, st.W, atol=1e-7)
    # training: normalized GD on each, lr 0.1, 1000 steps, float64, exact gradient
    trs = {}
    for pre in (relaxed, tight):
        trs[pre.prob.name] = train(
            pre.prob, steps=1000, lr=0.1, init=pre.W0, train_v=True, init_v=pre.v0, record_every=10
        )
    tr = trs["mmts-relaxed"]
    assert tr.alpha.tolist() == [1, 1, 1]
    assert _cos(_p(tr), [1, 0]) >= 0.999
    assert _cos(tr.final_v, sr.v) >= 0.999
    assert _cos(_p(tr), [1, 0]) > _cos(_p(tr), [1.25, 0.25])  # relaxed explains GD better
    assert _cos(_p(trs["mmts-tight"]), [4 / 3, 1 / 3]) >= 0.999
    assert _cos(trs["mmts-tight"].final_v, [0, 1]) >= 0.999


def test_authors_float32_loop_stalls_at_the_tight_direction():
    """The authors' setting (float32, plain softmax backward, ε in the normalizers) ends
    near the relaxed data's tight p^opt ∝ (1.25, 0.25), not at p^relax = (1, 0)."""
    pre = joint_problem("mmts-relaxed")
    Ws, vs = authors_loop(pre.prob, pre.W0, pre.v0, steps=1000, lr=0.1, dtype="float32")
    p = Ws[-1][:, 0]
    assert _cos(p, [1.25, 0.25]) > 0.999 > _cos(p, [1, 0])
    assert p[1] / np.linalg.norm(p) > 0.15
    # in float64 with ε = 0 the same loop is the engine's plain-gradient run, step for step
    W64, v64 = authors_loop(
        pre.prob, pre.W0, pre.v0, steps=30, lr=0.1, dtype="float64", eps=(0.0, 0.0)
    )
    tr = train(
        pre.prob, steps=30, lr=0.1, init=pre.W0, train_v=True, init_v=pre.v0, centred=False, eps=0.0
    )
    assert _rel(tr.W, W64) < STEP_TOL and _rel(tr.v, v64) < STEP_TOL


# -- MD-Att toy: the geometry picks the tokens -----------------------------------------------
def test_mdatt_toy_selection_depends_on_p():
    for p, want in ((2.0, [1, 0]), (3.0, [0, 0])):
        tr, sv = preset_run("mdatt-toy", p=p)  # the authors' 2000 steps, W₀ = v₀ = 0
        assert tr.alpha.tolist() == want
        assert sv.feasible and sv.support.all()
        assert correlation(tr.W[-1], sv.W) > 0.99 and _cos(tr.final_v, sv.v) > 0.99


def test_experiment_runs_small_and_charts():
    from attsvm import experiments
    from attsvm_charts.experiments import chart

    assert "joint-training" in experiments.FOLLOWUPS
    assert "joint-training" not in experiments.EXPERIMENTS
    res = experiments.run("joint-training", n=4, T=3, d=3, runs=3, steps=100, toy_ps=(2.0, 3.0))
    pre = res.frames["presets"].set_index(["preset", "p"])
    assert pre.loc[("mmts-relaxed", 2.0)].corr_relaxed >= 0.999
    assert pre.loc[("mmts-tight", 2.0)].corr_tight >= 0.999
    assert pre.loc[("mdatt-toy", 3.0)].alpha == "0 0"
    assert len(res.frames["runs"]) == 3 and "relaxed beats tight" in res.summary["text"]
    ok = res.frames["runs"].query("feasible and support < 4")
    assert len(ok) == 3  # the summary names the SVM with the highest median corr, as measured
    med = {k: ok[f"corr_{k}"].median() for k in ("balanced", "relaxed", "tight")}
    assert res.summary["closest"] == max(med, key=med.get)
    assert f"closest (median corr) the {res.summary['closest']} SVM" in res.summary["text"]
    assert chart(res).to_dict()
    with pytest.raises(ValueError, match="toy_ps"):
        experiments.settings("joint-training", toy_ps=(0.5,))


# -- the relaxed SVM: certificates and an independent formulation ---------------------------
def _case(seed):
    """A random instance at the optimal tokens of its own v (so the head SVM is feasible)."""
    prob = random_problem(6, 4, 4, seed=seed)
    return prob, optimal_tokens(prob)


@pytest.mark.parametrize("norm,p", [("fro", None), ("lp", 1.5), ("lp", 3.0)])
def test_relaxed_svm_kkt_and_independent_cvxpy(norm, p):
    checked = 0
    for seed in range(6):
        prob, alpha = _case(seed)
        sv = solve_joint_svm(prob, alpha, norm, p=p)
        if sv.v is None:
            continue
        A = prob.Y[:, None] * prob.X[np.arange(prob.n), alpha]
        rows, idx = constraint_rows(prob, alpha)
        b = sv.support[idx[:, 0]].astype(float)
        q = None if p is None else p / (p - 1)
        for M, rhs, w, lam in (
            (A, np.ones(prob.n), sv.v, sv.v_duals),
            (rows, b, sv.W.ravel(), sv.W_duals[idx[:, 0], idx[:, 2]]),
        ):
            marg = M @ w
            assert np.all(marg >= rhs - CERT_TOL)  # primal feasible
            assert np.all(lam >= -CERT_TOL)  # dual feasible
            scale = max(1.0, float(np.max(lam)))
            assert np.all(np.abs(lam * (marg - rhs)) < CERT_TOL * scale)  # compl. slackness
            G = M.T @ lam
            if norm == "fro":  # multipliers of ½‖w‖²: w = Σ λ_j M_j
                assert np.allclose(G, w, atol=1e-6)
            else:  # of ‖w‖_p: ‖G‖_q ≤ 1, zero gap
                assert np.sum(np.abs(G) ** q) ** (1 / q) <= 1 + 1e-6
                assert abs(rhs @ lam - np.sum(np.abs(w) ** p) ** (1 / p)) < 1e-6
        # the support sequences: margin 1 exactly there, > 1 elsewhere
        assert np.all(np.abs(sv.v_margins[sv.support] - 1) < 1e-6)
        # the independent cvxpy formulation
        if norm == "fro":
            lam = cp.Variable(rows.shape[0])
            cp.Problem(cp.Maximize(b @ lam - 0.5 * cp.sum_squares(rows.T @ lam)), [lam >= 0]).solve(
                solver="CLARABEL"
            )
            W_ref = (rows.T @ lam.value).reshape(4, 4)
        else:
            w = cp.Variable(16)
            cp.Problem(cp.Minimize(cp.sum(cp.power(cp.abs(w), p))), [rows @ w >= b]).solve(
                solver="CLARABEL"
            )
            W_ref = w.value.reshape(4, 4)
        assert np.linalg.norm(sv.W - W_ref) / np.linalg.norm(W_ref) < W_TOL
        # tight ≥ relaxed in norm; they differ when a sequence is not a support vector
        assert np.linalg.norm(sv.W_tight) >= np.linalg.norm(sv.W) - 1e-7
        checked += 1
        if not sv.support.all():
            assert sv.differ
    assert checked >= 3


def test_solve_joint_svm_validation():
    prob = random_problem(4, 3, 3)
    with pytest.raises(ValueError, match="norm"):
        solve_joint_svm(prob, [0, 0, 0, 0], "nuc")
    with pytest.raises(ValueError, match="`p`"):
        solve_joint_svm(prob, [0, 0, 0, 0], "lp")
    with pytest.raises(ValueError, match="`p`"):
        solve_joint_svm(prob, [0, 0, 0, 0], "fro", p=2.0)
    with pytest.raises(ValueError, match="alpha"):
        solve_joint_svm(prob, [0, 0, 0, 9])
    with pytest.raises(ValueError, match="queries"):
        solve_joint_svm(random_problem(3, 3, 3, queries="causal"), None)


def test_balanced_svm_interpolates_relaxed_and_tight_at_its_fixed_point():
    from attsvm.joint import balanced_att_svm

    prob, alpha = _case(0)
    sv = solve_joint_svm(prob, alpha)
    assert sv.differ
    W0, _ = balanced_att_svm(prob, sv, ratio=0.0)
    Winf, _ = balanced_att_svm(prob, sv, ratio=1e9)
    assert np.linalg.norm(W0 - sv.W_tight) / np.linalg.norm(sv.W_tight) < W_TOL
    assert np.linalg.norm(Winf - sv.W) / np.linalg.norm(sv.W) < W_TOL
    Wb, rho = balanced_att_svm(prob, sv)
    assert abs(rho - np.linalg.norm(Wb) / np.linalg.norm(sv.v)) < 1e-3 * rho
    assert np.linalg.norm(sv.W) - 1e-7 <= np.linalg.norm(Wb) <= np.linalg.norm(sv.W_tight) + 1e-7
    rows, idx = constraint_rows(prob, alpha)
    b = np.where(sv.support, 1.0, np.maximum(0.0, 1 - (sv.v_margins - 1) * rho))[idx[:, 0]]
    assert np.all(rows @ Wb.ravel() >= b - 1e-6)


def test_the_relaxed_limit_needs_the_exact_gradient():
    """Plain autodiff (the softmax backward that cancels once 1 − s_max < 2⁻⁵³) with ε = 0
    ends on the tight direction of the relaxed data even in float64; the centred default
    reaches p^relax."""
    pre = joint_problem("mmts-relaxed")
    kw = dict(steps=1000, lr=0.1, init=pre.W0, train_v=True, init_v=pre.v0, record_every=1000)
    plain = train(pre.prob, centred=False, eps=0.0, **kw)
    assert _cos(_p(plain), [1.25, 0.25]) > 0.9999 and _cos(_p(plain), [1, 0]) < 0.99
    assert _cos(_p(train(pre.prob, **kw)), [1, 0]) > 0.99999
