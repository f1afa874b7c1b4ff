"""attsvm.training / engine: the JAX GD engine against a plain numpy GD loop, its records, padding,
compilation reuse, saturation and overflow reports, and the paper's GD facts (docs/theory.md §6
facts 6, 7, 10, 13)."""

from __future__ import annotations

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from reference import np_forward, np_gd, np_grad, np_objective, rel
from test_model import small_problem

import attsvm
from attsvm import batching, engine, training
from attsvm.optimizers import AUTHORS_GRADIENT


def init_for(prob, param, seed=0, m=None):
    return attsvm.default_init(prob, param, seed=seed, m=m)


# -- the engine against a numpy loop: one contract over heads × parameterizations --------------
CASES = [  # head, loss, param, normalized, ridge, m, queries
    ("linear", "logistic", "W", True, None, None, "single"),
    ("relu", "exponential", "W", True, None, None, "single"),
    ("quadratic", "correlation", "W", True, None, None, "single"),
    ("linear", "logistic", "KQ", True, 1e-3, None, "single"),
    ("relu", "exponential", "KQ", True, None, 2, "single"),
    ("quadratic", "correlation", "KQ", True, 0.0, None, "single"),
    ("linear", "exponential", "W", False, None, None, "single"),
    ("linear", "logistic", "KQ", False, 1e-3, None, "single"),
    ("linear", "logistic", "W", True, None, None, "sequence"),
    ("relu", "logistic", "KQ", True, None, None, "causal"),
]


@pytest.mark.parametrize("head,loss,param,normalized,ridge,m,queries", CASES)
def test_engine_matches_a_numpy_gd_loop(head, loss, param, normalized, ridge, m, queries):
    prob = small_problem(head, queries=queries, seed=3)
    init = init_for(prob, param, seed=4, m=m)
    steps, lr = 25, (0.1 if normalized else 0.5)
    run = attsvm.train(
        prob,
        param=param,
        steps=steps,
        lr=lr,
        normalized=normalized,
        loss=loss,
        init=init,
        m=m,
        ridge=ridge,
    )
    eps = training.RIDGE_EPS if ridge is None else ridge
    Ws, Ls = np_gd(
        prob, init, param, steps=steps, lr=lr, loss=loss, normalized=normalized, ridge=eps
    )
    assert run.W.shape == (steps + 1, prob.d, prob.d) and run.overflow_at == -1
    for j in range(steps + 1):
        assert rel(run.W[j], Ws[j]) < 1e-11, j
    np.testing.assert_allclose(run.loss, Ls, rtol=1e-11)
    _, s_last, _ = np_forward(prob, Ws[-1])
    np.testing.assert_allclose(
        run.probs[-1], s_last if queries != "single" else s_last[:, 0], rtol=1e-9, atol=1e-13
    )
    if param == "KQ":
        assert run.K.shape == (prob.d, m or prob.d)
        np.testing.assert_allclose(run.K @ run.Q.T, run.W[-1], rtol=1e-12, atol=1e-14)


# -- records -----------------------------------------------------------------------------------
def test_records_follow_the_contract():
    """W[0] is the init, W[-1] the state after `steps`; probs/loss at W[j]; record_every
    subsamples the same trajectory."""
    prob = attsvm.random_problem(4, 5, 6, seed=0)
    init = init_for(prob, "W", seed=1)
    full = attsvm.train(prob, param="W", steps=40, init=init, record_every=1)
    sub = attsvm.train(prob, param="W", steps=40, init=init, record_every=8)
    np.testing.assert_array_equal(full.steps, np.arange(41))
    np.testing.assert_array_equal(sub.steps, [0, 8, 16, 24, 32, 40])
    np.testing.assert_array_equal(full.W[0], init)
    np.testing.assert_allclose(sub.W, full.W[::8], rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(sub.loss, full.loss[::8], rtol=1e-13)
    for j in (0, 17, 40):
        f, s, _ = np_forward(prob, full.W[j])
        np.testing.assert_allclose(full.probs[j], s[:, 0], rtol=1e-12, atol=1e-15)
        assert full.loss[j] == pytest.approx(
            np_objective(prob, full.W[j], "W", "logistic"), rel=1e-12
        )
    for a in (full.W, full.probs, full.loss, full.grad_norm):
        assert a.dtype == np.float64
    # fact 10: normalized GD moves W by exactly η per step, so ‖W(k)‖ ≤ ‖W(0)‖ + η k
    assert np.all(full.norms <= full.norms[0] + 0.1 * full.steps + 1e-12)
    np.testing.assert_allclose(np.linalg.norm(np.diff(full.W, axis=0), axis=(1, 2)), 0.1, rtol=1e-9)


def test_a_run_continues_exactly_from_its_final_params():
    prob = attsvm.random_problem(3, 4, 5, seed=2)
    for param in ("W", "KQ"):
        init = init_for(prob, param, seed=0)
        whole = attsvm.train(prob, param=param, steps=30, init=init, record_every=30)
        first = attsvm.train(prob, param=param, steps=15, init=init, record_every=15)
        second = attsvm.train(prob, param=param, steps=15, init=first.final_params, record_every=15)
        assert rel(second.W[-1], whole.W[-1]) < 1e-12


def test_batches_equal_single_runs_and_draw_a_different_default_init_per_run():
    probs = [attsvm.random_problem(3, 4, 5, seed=s) for s in range(3)]
    batch = attsvm.train_batch(probs, param="KQ", steps=10, seed=7, record_every=5)
    assert batch.W.shape == (3, 3, 5, 5) and len(batch) == 3
    assert not np.allclose(batch.W[0, 0], batch.W[1, 0])
    for b, p in enumerate(probs):
        K, Q = attsvm.default_init(p, "KQ", seed=7, index=b)
        np.testing.assert_allclose(batch.W[b, 0], K @ Q.T, rtol=1e-14)
        single = attsvm.train(p, param="KQ", steps=10, init=(K, Q), record_every=5)
        np.testing.assert_allclose(batch[b].W, single.W, rtol=1e-12, atol=1e-14)
        np.testing.assert_array_equal(batch[b].alpha, single.alpha)


def test_kq_singular_values_and_rank_m():
    prob = attsvm.random_problem(3, 4, 6, seed=0)
    run = attsvm.train(prob, param="KQ", steps=20, m=2, record_every=10)
    sv = run.singular_values
    assert sv.shape == (3, 6)
    np.testing.assert_allclose(sv, np.linalg.svd(run.W, compute_uv=False), rtol=1e-12)
    assert np.all(sv[:, 2:] < 1e-12 * sv[:, :1])  # W = K Qᵀ has rank ≤ m = 2


def test_backend_is_reported():
    info = attsvm.backend()
    assert info["x64"] is True and info["platform"] in ("cpu", "gpu", "cuda", "rocm", "tpu")
    run = attsvm.train(attsvm.random_problem(2, 3, 2, seed=0), steps=2)
    assert run.backend == info["platform"]


# -- padding is exact --------------------------------------------------------------------------
@given(
    X=hnp.arrays(np.float64, (5, 7, 9), elements=st.floats(-2, 2)),
    Z=hnp.arrays(np.float64, (5, 9), elements=st.floats(0.1, 1)),
    v=hnp.arrays(np.float64, (9,), elements=st.floats(0.1, 1)),
    labels=hnp.arrays(np.bool_, (5,)),
)
def test_padding_to_a_bucket_is_exact(X, Z, v, labels):
    """(5, 7, 9) runs in the (5, 8, 10) bucket: masked tokens, zero features and zero-padded
    W must reproduce an unpadded numpy GD loop."""
    assert tuple(batching.bucket(x) for x in (5, 7, 9)) == (5, 8, 10)
    prob = attsvm.Problem(X=X, Y=np.where(labels, 1.0, -1.0), Z=Z, v=v)
    init = init_for(prob, "W", seed=0)
    # Tokens that all score alike (e.g. all equal) have a zero gradient: normalized GD then
    # follows rounding noise, which no two implementations share. Compare real gradients:
    # the step's direction carries a rounding error of about 1e-16 × O(1) / ‖∇L‖, so at
    # ‖∇L‖ = 1.4e-4 (nearly all tokens equal, found by an xdist run) 8 steps already drifted
    # 1.9e-12 apart, past atol; from 1e-3 on, the bound is a tenth of that or less.
    assume(np.linalg.norm(np_grad(prob, init, "W", "logistic")) > 1e-3)
    run = attsvm.train(prob, param="W", steps=8, init=init, record_every=1)
    Ws, Ls = np_gd(prob, init, "W", steps=8, lr=0.1, loss="logistic")
    assert run.W.shape == (9, 9, 9) and run.probs.shape == (9, 5, 7)
    np.testing.assert_allclose(run.W, Ws, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(run.loss, Ls, rtol=1e-10)


def test_padding_is_exact_for_kq_and_sequences():
    prob = attsvm.random_problem(3, 7, 9, seed=5, queries="causal")
    init = init_for(prob, "KQ", seed=2, m=7)
    run = attsvm.train(prob, param="KQ", steps=6, init=init, m=7, ridge=1e-3)
    Ws, _ = np_gd(prob, init, "KQ", steps=6, lr=0.1, loss="logistic", ridge=1e-3)
    np.testing.assert_allclose(run.W, Ws, rtol=1e-10, atol=1e-12)
    assert run.K.shape == (9, 7) and run.probs.shape == (7, 3, 7, 7)


# -- no recompilation --------------------------------------------------------------------------
def test_a_new_step_size_or_a_size_in_the_same_bucket_does_not_recompile():
    p1 = attsvm.random_problem(5, 7, 9, seed=0)
    attsvm.train(p1, param="W", steps=12, lr=0.1, record_every=3)
    before = engine.compile_count()
    attsvm.train(p1, param="W", steps=12, lr=0.37, record_every=3)  # new lr
    attsvm.train(
        attsvm.random_problem(5, 8, 10, seed=1), param="W", steps=12, lr=0.2, record_every=3
    )  # same bucket
    attsvm.train(p1, param="W", steps=12, lr=0.1, record_every=3, init=np.eye(9), seed=3)
    attsvm.train(p1, param="W", steps=40, lr=0.1, record_every=10)  # same number of records
    assert engine.compile_count() == before
    attsvm.train(p1, param="W", steps=12, lr=0.1, record_every=4)  # a new record count compiles
    attsvm.train(
        attsvm.random_problem(4, 7, 9, seed=1), param="W", steps=12, lr=0.1, record_every=3
    )  # n = 4 is another bucket
    assert engine.compile_count() == before + 2


# -- saturation and overflow
def test_saturation_is_reported_per_sequence(fixture_problem, fixture_npz):
    run = attsvm.train(
        fixture_problem,
        param="W",
        steps=2000,
        init=fixture_npz["W_W_init"],
        record_every=10,
        **AUTHORS_GRADIENT,
    )
    sat = run.saturated_at
    assert sat.shape == (fixture_problem.n,)
    # the authors' run: mean selected softmax ≥ 0.99 after ~300 steps; tails < 1e-13 later
    assert np.all((sat >= 300) & (sat <= 2000)), sat
    for i, k in enumerate(sat):
        j = int(np.searchsorted(run.steps, k))
        assert run.tail_mass[j, i] < 1e-13 and run.tail_mass[j - 1, i] >= 1e-13
    never = attsvm.train(fixture_problem, param="W", steps=20, record_every=10)
    np.testing.assert_array_equal(never.saturated_at, -1)


def test_the_exact_default_is_not_saturated_where_the_authors_freeze(fixture_problem, fixture_npz):
    """Exact gradients: the same run keeps converging; its tails (resolved far below 1e-16)
    are nowhere near the 1e-300 underflow threshold at step 2000."""
    run = attsvm.train(
        fixture_problem, param="W", steps=2000, init=fixture_npz["W_W_init"], record_every=100
    )
    assert run.saturation_tol == 1e-300
    np.testing.assert_array_equal(run.saturated_at, -1)
    tail = run.tail_mass[-1]
    assert np.all((tail > 0) & (tail < 1e-16)), tail
    P = run.probs[-1]
    want = [sum(P[i, t] for t in range(P.shape[1]) if t != P[i].argmax()) for i in range(len(P))]
    np.testing.assert_allclose(tail, want, rtol=1e-15)


def test_an_overflowing_run_is_stopped_with_finite_records():
    """Plain GD, exponential loss, a large head: the first update jumps to a state whose
    loss overflows; GD must stop at the last finite state and say so."""
    base = attsvm.random_problem(6, 8, 10, seed=0)
    prob = base.with_(v=2000 * base.v)
    for param in ("W", "KQ"):
        run = attsvm.train(
            prob,
            param=param,
            steps=20,
            lr=1.0,
            normalized=False,
            loss="exponential",
            record_every=1,
        )
        assert run.overflow_at >= 0
        for a in (run.W, run.probs, run.loss, run.grad_norm, run.norms):
            assert np.all(np.isfinite(a))
        k = int(run.overflow_at)
        np.testing.assert_array_equal(run.W[k:], np.broadcast_to(run.W[k], run.W[k:].shape))
    ok = attsvm.train(base, param="W", steps=20, lr=1.0, normalized=False, loss="exponential")
    assert ok.overflow_at == -1


# -- facts 6 and 7: GD on the paper's 2-D instances
def test_fact6_geometry1_gd_picks_each_parameterizations_own_svm():
    g = attsvm.paper_problem("geometry-1")
    fro = attsvm.solve_att_svm(g, norm="fro").W
    nuc = attsvm.solve_att_svm(g, norm="nuc").W
    W = attsvm.train(g, param="W", steps=2000, init=np.zeros((2, 2)), record_every=100)
    corr = attsvm.correlation(W.W, fro)
    assert corr[5] >= 0.994 and corr[20] >= 0.9996  # steps 500 and 2000
    assert attsvm.correlation(W.W[-1], nuc) < 0.91
    np.testing.assert_allclose(W.norms[[1, 5]], [9.68, 45.48], atol=0.05)  # docs/theory.md §4 E1
    K0 = 0.1 * np.random.default_rng(0).standard_normal((2, 2))
    # the paper's figure is the authors' loop: one sequence saturates within 100 steps, and
    # with the exact gradient (the default) 1 − corr(KQ.W[5], nuc) is 1.8e-3, not 1.2e-4
    KQ = attsvm.train(
        g, param="KQ", steps=2000, init=(K0, np.zeros((2, 2))), record_every=100, **AUTHORS_GRADIENT
    )
    assert attsvm.correlation(KQ.W[5], nuc) >= 0.9998
    assert 0.85 <= attsvm.correlation(KQ.W[-1], fro) <= 0.93
    assert np.all(KQ.alpha == attsvm.optimal_tokens(g)) and np.all(W.alpha == [0, 2])


def test_fact7_geometry2_gd_converges_fast():
    g = attsvm.paper_problem("geometry-2")
    fro = attsvm.solve_att_svm(g).W
    run = attsvm.train(
        g, param="W", steps=2000, init=np.zeros((2, 2)), record_every=100, **AUTHORS_GRADIENT
    )
    corr = attsvm.correlation(run.W, fro)
    assert corr[1] >= 0.99 and corr[20] >= 0.999
    # the authors' ‖W‖ stalls near 58 once ‖∇L‖ < 1e-16 (docs/theory.md §4: 9.9 / 49.7 / 58.1)
    np.testing.assert_allclose(run.norms[[1, 5, 20]], [9.9, 49.7, 58.1], atol=0.2)


# -- fact 13: the λ-head selects the water-filling set
def simplex_projection(y):
    u = np.sort(y)[::-1]
    css = np.cumsum(u)
    k = np.arange(1, len(y) + 1)
    rho = k[u - (css - 1) / k > 0].max()
    return np.maximum(y - (css[rho - 1] - 1) / rho, 0.0)


def orthonormal_problem(seed, lam, d=4):
    """One sequence of T = d orthonormal tokens (rows of an orthogonal matrix), Y = +1."""
    rng = np.random.default_rng(seed)
    X = np.linalg.qr(rng.standard_normal((d, d)))[0].T[None]
    z, v = rng.standard_normal(d), rng.standard_normal(d)
    return attsvm.Problem(
        X=X,
        Y=[1.0],
        Z=(z / np.linalg.norm(z))[None],
        v=v / np.linalg.norm(v),
        head="quadratic",
        lam=lam,
    )


def test_fact13_water_filling_maximizes_the_quadratic_head():
    """With orthonormal tokens f(s) = γᵀs − λ‖s‖²; its maximizer over the simplex is the
    projection of γ/(2λ) (checked against a generic constrained optimizer)."""
    from scipy.optimize import minimize

    for seed in range(3):
        p = orthonormal_problem(seed, 0.3)
        gamma = p.X[0] @ p.v
        pred = simplex_projection(gamma / 0.6)
        res = minimize(
            lambda s: -(gamma @ s - 0.3 * s @ s),
            np.full(4, 0.25),
            constraints=[{"type": "eq", "fun": lambda s: s.sum() - 1}],
            bounds=[(0, 1)] * 4,
            method="SLSQP",
            options={"ftol": 1e-14},
        )
        np.testing.assert_allclose(res.x, pred, atol=1e-6)


def test_fact13_gd_selects_the_water_filling_set_growing_with_lambda():
    lams = (0.05, 0.2, 0.5, 1.0, 2.0)
    probs = [orthonormal_problem(seed, lam) for seed in range(10) for lam in lams]
    run = attsvm.train_batch(
        probs, param="W", steps=5000, record_every=5000, init=[np.zeros((4, 4))] * len(probs)
    )
    checked = 0
    for seed in range(10):
        pred_sizes, gd_sizes = [], []
        for j, lam in enumerate(lams):
            b = seed * len(lams) + j
            gamma = probs[b].X[0] @ probs[b].v
            pred = simplex_projection(gamma / (2 * lam))
            s = run.probs[b, -1, 0]
            pred_sizes.append(int((pred > 0).sum()))
            gd_sizes.append(int((s > 1e-2).sum()))
            # borderline predictions (a selected weight < 0.05) are left out of the comparison
            if pred[pred > 0].min() >= 0.05:
                assert gd_sizes[-1] == pred_sizes[-1], (seed, lam, s, pred)
                np.testing.assert_allclose(s, pred, atol=0.03)
                checked += 1
        assert pred_sizes == sorted(pred_sizes) and gd_sizes == sorted(gd_sizes)
        assert pred_sizes[0] == 1  # λ → 0: a single token
    assert checked >= 40


def test_causal_first_query_is_never_reported_saturated():
    # Query 0 of a causal problem attends to one token only: its tail mass is 0 from the
    # start, which is not float64 saturation.
    prob = attsvm.random_problem(n=2, T=4, d=6, seed=1, attention="self", queries="causal")
    run = attsvm.train(prob, steps=20, record_every=10)
    assert run.saturated_at.shape == (2, 4)
    assert np.all(run.saturated_at[:, 0] == -1)
    assert np.all(run.tail_mass[:, :, 0] == 0.0)


def test_train_options_name_every_keyword_of_train_but_the_inits():
    import inspect

    params = inspect.signature(attsvm.train).parameters
    assert all(p.kind is p.KEYWORD_ONLY for name, p in params.items() if name != "prob")
    assert set(training.TRAIN_OPTIONS) == set(params) - {"prob", "init", "init_v"}
