"""Small initialization, weight decay and the staircase measures (attsvm.staircase):
`init_scale`/`init_kind`/`weight_decay` against a plain numpy loop, step for step; the
measures against closed forms; the acceptance statements on held-out instances (data seeds
500-… were not used while developing: those were 0-6 and 1000-1011); both experiments at a
tiny size."""

from __future__ import annotations

import math

import numpy as np
import pytest
from reference import np_grad, np_objective

import attsvm
from attsvm import experiments, training
from attsvm import staircase as sc
from attsvm.__main__ import main
from attsvm.problems import random_problem

HELD_OUT = range(500, 508)


def _np_loop(prob, K, Q, *, steps, lr, lam, normalized):
    """Plain numpy GD on L(K Qᵀ) + λ/2 (‖K‖² + ‖Q‖²): the weight-decay gradient λK, λQ
    written here, not taken from the library's ridge."""
    Ws = [K @ Q.T]
    for _ in range(steps):
        gK, gQ = np_grad(prob, (K, Q), "KQ", "logistic", 0.0)
        gK, gQ = gK + lam * K, gQ + lam * Q
        if normalized:
            gK, gQ = gK / np.linalg.norm(gK), gQ / np.linalg.norm(gQ)
        K, Q = K - lr * gK, Q - lr * gQ
        Ws.append(K @ Q.T)
    return np.stack(Ws), K, Q


@pytest.mark.parametrize("normalized", [False, True])
def test_init_scale_and_weight_decay_match_a_numpy_loop_step_for_step(normalized):
    prob = random_problem(6, 8, 10, seed=3)  # one shape for the whole file: one compile
    a, lam, lr, seed = 0.05, 0.02, 0.3, 7
    tr = attsvm.train(
        prob,
        param="KQ",
        steps=50,
        lr=lr,
        normalized=normalized,
        seed=seed,
        init_scale=a,
        weight_decay=lam,
    )
    rng = np.random.default_rng([seed, 0])  # the documented draw of run 0
    K0, Q0 = a * rng.standard_normal((10, 10)), a * rng.standard_normal((10, 10))
    Ws, K, Q = _np_loop(prob, K0, Q0, steps=50, lr=lr, lam=lam, normalized=normalized)
    assert np.max(np.abs(tr.W - Ws)) < 1e-10
    assert np.max(np.abs(tr.K - K)) < 1e-10 and np.max(np.abs(tr.Q - Q)) < 1e-10
    assert tr.settings["ridge"] == lam / 2 and tr.settings["weight_decay"] == lam
    # the recorded settings replay the run (both spellings present and consistent)
    again = attsvm.train(prob, **{k: tr.settings[k] for k in training.TRAIN_OPTIONS})
    assert np.array_equal(again.W, tr.W)


def test_weight_decay_is_the_ridge_at_half_and_the_objective_says_so():
    prob = random_problem(6, 8, 10, seed=1)
    K, Q = training.scaled_init(prob, init_scale=0.7, seed=2)
    lam = 0.3
    want = np_objective(prob, (K, Q), "KQ", "logistic") + lam / 2 * (np.sum(K * K) + np.sum(Q * Q))
    a = attsvm.train(
        prob, param="KQ", steps=50, init=(K, Q), weight_decay=lam, lr=0.1, normalized=False
    )
    b = attsvm.train(
        prob, param="KQ", steps=50, init=(K, Q), ridge=lam / 2, lr=0.1, normalized=False
    )
    assert np.array_equal(a.W, b.W)
    from attsvm import model
    from attsvm.batching import pad_data

    data = model.Data(**pad_data(prob, prob.shape))
    got = float(
        model.objective(
            (K, Q),
            data,
            training.ridge_of("KQ", None, lam),
            param="KQ",
            head_kind="linear",
            loss_kind="logistic",
        )
    )
    assert abs(got - want) < 1e-12


def test_diagonal_and_aligned_inits_are_what_the_docs_say():
    prob = random_problem(6, 8, 10, seed=4)
    K, Q = training.scaled_init(prob, init_scale=0.01, init_kind="diagonal", m=5)
    assert np.array_equal(K, 0.01 * np.eye(10, 5)) and np.array_equal(Q, K)
    G = np_grad(prob, np.zeros((10, 10)), "W", "logistic")  # ∇L(0), by hand
    assert np.max(np.abs(training.gradient_at_zero(prob) - G)) < 1e-14
    K, Q = training.scaled_init(prob, init_scale=0.1, init_kind="aligned")
    assert np.allclose(K.T @ K, 0.01 * np.eye(10)) and np.allclose(Q.T @ Q, 0.01 * np.eye(10))
    U, S, Vt = np.linalg.svd(-G)
    assert np.allclose(K[:, 0] @ (-G) @ Q[:, 0], 0.01 * S[0])  # top pair, descent sign


@pytest.mark.parametrize(
    "kw, field",
    [
        (dict(param="W", init_scale=0.1), "init_scale"),
        (dict(param="KQ", init_scale=0.1, init=(np.eye(3), np.eye(3))), "init"),
        (dict(param="KQ", init_kind="diagonal"), "init_scale"),
        (dict(param="KQ", init_scale=0.0), "init_scale"),
        (dict(param="KQ", init_scale=0.1, init_kind="orthogonal"), "init_kind"),
        (dict(param="KQ", weight_decay=-1.0), "weight_decay"),
        (dict(param="W", weight_decay=0.1), "weight_decay"),
        (dict(param="KQ", weight_decay=0.1, ridge=0.1), "weight_decay"),
    ],
)
def test_bad_options_name_their_field(kw, field):
    with pytest.raises(ValueError, match=f"`{field}`"):
        attsvm.train(random_problem(2, 3, 3, seed=0), steps=2, **kw)


# -- the measures -------------------------------------------------------------------------
def test_measures_against_closed_forms():
    A = np.diag([3.0, 1.0, 0.0])
    assert sc.stable_rank(A) == pytest.approx(10 / 9) and sc.stable_rank(np.zeros((2, 2))) == 0
    steps = np.array([0, 10, 20, 30])
    sv = np.array([[0, 0], [0.5, 0], [2, 0.05], [4, 0.5]], float)
    assert np.array_equal(sc.takeoff_steps(steps, sv), [10, 30])  # 0.1·σ₁(end) = 0.4
    assert math.isnan(sc.takeoff_steps(steps, sv[:, [0, 0]] * [1, 0])[1])
    R = np.linalg.qr(np.random.default_rng(0).standard_normal((4, 4)))[0]
    K = np.diag([2.0, 1, 0.5, 0]) @ R  # K = Q: balanced, gap 0
    sq, nuc, gap, imb = sc.factor_measures(K, K)
    assert abs(gap) < 1e-12 and imb < 1e-12 and nuc == pytest.approx(sq / 2)
    sq, nuc, gap, imb = sc.factor_measures(2 * K, K / 2)  # unbalanced, same KQᵀ
    assert gap == pytest.approx((4 + 1 / 4) / 2 * 5.25 - 5.25)
    assert sc.rescaled_time([0, 100], 0.5, 1e-4).tolist() == [0, 50 / math.log(1e4)]
    assert np.isnan(sc.rescaled_time([100], 0.5, 1.0)).all()


def test_a_run_cut_into_segments_is_the_same_run():
    probs = [random_problem(6, 8, 10, seed=s) for s in (2, 3, 4, 5)]
    r = sc.run_staircase(
        probs, init_scale=0.1, weight_decay=0.01, steps=400, lr=0.5, record_every=100, segments=4
    )
    one = attsvm.train_batch(
        probs,
        param="KQ",
        steps=400,
        lr=0.5,
        normalized=False,
        init_scale=0.1,
        weight_decay=0.01,
        record_every=100,
    )
    assert np.max(np.abs(r.W - one.W)) < 1e-12 and np.max(np.abs(r.K - one.K)) < 1e-12
    sq, nuc, gap, _ = sc.factor_measures(one.K, one.Q)
    assert np.allclose(r.sq_norm[:, -1], sq) and np.allclose(r.gap[:, -1], gap, atol=1e-12)


# -- acceptance on held-out instances -------------------------------------------------------
def test_small_init_keeps_delta_w_rank_one_and_unit_init_does_not():
    """σ₂/σ₁ of ΔW at step 1000: < 0.01 on every held-out instance from α = 1e-4, and at
    most 0.015 (measured ≤ 0.0101) on every record from σ₁'s take-off on (before it, ΔW =
    O(α²) grows in every direction: σ₂/σ₁ is 0.03–0.55 at step 50 here); > 0.3 on most
    from α = 1."""
    probs = [random_problem(6, 8, 10, seed=s) for s in HELD_OUT]
    small = sc.run_staircase(probs, init_scale=1e-4, steps=1000, lr=0.5, record_every=50)
    at = small.ratio_at(1000)
    assert np.all(at < 0.01), at
    after = small.steps[None] >= small.takeoff[:, :1]
    assert np.all(np.where(after, small.ratio(), 0) < 0.015)
    unit = sc.run_staircase(probs, init_scale=1.0, steps=1000, lr=0.5, record_every=50)
    assert np.mean(unit.ratio_at(1000) > 0.3) >= 0.75, unit.ratio_at(1000)


def test_weight_decay_balances_the_factors_to_1e6_and_at_the_predicted_rate():
    probs = [random_problem(6, 8, 10, seed=s) for s in HELD_OUT[:4]]
    tr = attsvm.train_batch(
        probs,
        param="KQ",
        steps=20_000,
        lr=0.5,
        normalized=False,
        init_scale=1.0,
        weight_decay=0.01,
        record_every=20_000,
    )
    sq, nuc, gap, _ = sc.factor_measures(tr.K, tr.Q)
    assert np.all(np.abs(sq / 2 - nuc) <= 1e-6 * nuc), (sq / 2 - nuc) / nuc
    r = sc.run_staircase(
        probs, init_scale=1.0, weight_decay=0.01, steps=4000, lr=0.5, record_every=100, segments=40
    )
    want = sc.predicted_rates(0.5, 0.01)["gap"]
    got = [sc.decay_rate(r.checkpoints, g, 1e-13, 1e-4) for g in r.rel_gap]
    assert np.allclose(got, want, rtol=0.1), (got, want)


# -- the experiments ------------------------------------------------------------------------
def test_both_experiments_run_tiny_and_are_listed(capsys, tmp_path):
    # the sizes of the acceptance tests above: their compiled programs are reused
    res = experiments.run(
        "rank-staircase", runs=8, steps=1000, record_every=50, alphas=(1e-4, 1.0), ratio_step=1000
    )
    by = res.frames["by_alpha"].set_index("alpha")
    assert by.loc[1e-4, "median_ratio_at"] < by.loc[1.0, "median_ratio_at"]
    assert {"takeoff", "runs", "curves"} <= set(res.frames) and "α=0.0001" in res.summary["text"]
    # the take-off step is a median over the runs where σ₂ takes off: the summary says how many
    t2 = res.frames["takeoff"].query("k == 2").set_index("alpha")
    for a, part in zip((1e-4, 1.0), res.summary["text"].split("; "), strict=True):
        up = round(t2.loc[a, "taken_off"] * 8)
        assert f"σ₂ takes off in {up}/8 runs" in part, part
    wd = experiments.run("weight-decay", runs=4, steps=2000, segments=20, lambdas=(0.0, 0.02))
    b = wd.frames["by_lambda"].set_index("weight_decay")
    assert b.loc[0.02, "max_rel_gap"] < 1e-9 < b.loc[0.0, "max_rel_gap"]
    assert "predicted" in wd.summary["text"]
    from attsvm_charts.experiments import chart

    assert '"hconcat"' in chart(res).to_json() and '"hconcat"' in chart(wd).to_json()
    for name in ("rank-staircase", "weight-decay"):
        assert name in experiments.FOLLOWUPS and experiments.price(name).seconds > 0
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "rank-staircase" in out and "weight-decay" in out
    with pytest.raises(ValueError, match="`alphas`"):
        experiments.settings("rank-staircase", alphas=())
    with pytest.raises(ValueError, match="`segments`"):
        experiments.settings("weight-decay", steps=1000, segments=3)


def test_float_grids_are_sorted_distinct_and_refused_by_name():
    # the one check behind every experiment's list of α, λ, p or thresholds
    from attsvm.experiments import settings
    from attsvm.experiments.core import check_float_grid

    assert check_float_grid("g", [0.3, 1e-4, 0.3], 0.0, 1.0, lo_open=True) == (1e-4, 0.3)
    for bad in ([], [0.0], [2.0], 5, ["x"]):
        with pytest.raises(ValueError, match="`g`"):
            check_float_grid("g", bad, 0.0, 1.0, lo_open=True)
    assert settings("weight-decay", lambdas=(0.01, 0.0)).lambdas == (0.0, 0.01)
    with pytest.raises(ValueError, match="`ps`"):
        settings("lp-mirror-descent", ps=())
