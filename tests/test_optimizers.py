"""Every update rule of the GD engine (`attsvm.train(optimizer=…)`, rules in
attsvm.optimizers) against a plain numpy loop (tests/reference_optim.py) step for step, p = 2
mirror descent against GD, the Polyak cap and L*, and bad inputs.

Contract: 50 steps of each optimizer match the numpy reference to 1e-10 relative
(‖W_k − W_k^ref‖_F / ‖W_k^ref‖_F, the worst k); p = 2 MD equals GD to rounding (1e-13).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from reference import np_objective, rel
from reference_optim import np_loss_infimum, np_optimize

import attsvm
from attsvm import optimizers as O

STEPS = 50
TOL = 1e-10

# (optimizer, p, lr): step sizes that move W well away from the start in 50 steps
W_CASES = [
    ("gd", None, 2.0),
    ("ngd", None, 0.1),
    ("polyak", None, 0.5),
    ("md", 1.5, 0.5),
    ("md", 3.0, 2.0),
    ("nmd", 1.25, 0.02),
    ("nmd", 3.0, 0.1),
    ("sign", None, 0.01),
    ("spectral", None, 0.05),
]


@pytest.fixture(scope="module")
def prob():
    return attsvm.random_problem(4, 5, 6, seed=2)


def engine(prob, *, optimizer, steps, lr, p=None, init=None, param="W", **kw):
    """The engine on one problem, every step recorded; W_0 = 0 unless `init` is given."""
    if init is None:
        init = np.zeros((prob.d, prob.d))
    m = init[0].shape[1] if param == "KQ" else None
    return attsvm.train(
        prob,
        param=param,
        optimizer=optimizer,
        p=p,
        steps=steps,
        lr=lr,
        init=init,
        m=m,
        record_every=1,
        **kw,
    )


def worst_rel(A, B):
    return max(rel(a, b) for a, b in zip(A, B, strict=True))


@pytest.mark.parametrize("optimizer,p,lr", W_CASES)
def test_every_optimizer_matches_the_numpy_loop_step_for_step(prob, optimizer, p, lr):
    init = attsvm.default_init(prob, "W", seed=1)
    kw = dict(max_step=10 * lr) if optimizer == "polyak" else {}  # the engine's step bound
    run = engine(prob, optimizer=optimizer, steps=STEPS, lr=lr, p=p, init=init)
    ref = np_optimize(prob, init, "W", optimizer=optimizer, steps=STEPS, lr=lr, p=p, **kw)
    assert rel(ref[-1], ref[0]) > 0.3  # the run went somewhere
    assert worst_rel(run.W, ref) <= TOL
    np.testing.assert_allclose(
        run.loss, [np_objective(prob, W, "W", "logistic") for W in ref], rtol=TOL
    )


@pytest.mark.parametrize("optimizer", ["gd", "ngd", "md"])
def test_the_plain_gradient_matches_too(prob, optimizer):
    p = 1.5 if optimizer == "md" else None
    run = engine(prob, optimizer=optimizer, steps=STEPS, lr=0.1, p=p, centred=False)
    ref = np_optimize(
        prob, np.zeros((6, 6)), "W", optimizer=optimizer, steps=STEPS, lr=0.1, p=p, centred=False
    )
    assert worst_rel(run.W[1:], ref[1:]) <= TOL


@pytest.mark.parametrize(
    "optimizer,lr", [("gd", 2.0), ("ngd", 0.1), ("polyak", 0.5), ("sign", 0.01)]
)
def test_kq_optimizers_match_the_numpy_loop(prob, optimizer, lr):
    init = attsvm.default_init(prob, "KQ", seed=3, m=4)
    ridge = 0.0 if optimizer == "polyak" else 1e-3  # Polyak's gap excludes the ridge
    kw = dict(max_step=10 * lr) if optimizer == "polyak" else {}
    run = engine(prob, optimizer=optimizer, steps=STEPS, lr=lr, param="KQ", init=init, ridge=ridge)
    ref = np_optimize(prob, init, "KQ", optimizer=optimizer, steps=STEPS, lr=lr, ridge=ridge, **kw)
    assert worst_rel(run.W, ref) <= TOL


def test_ngd_with_the_authors_epsilon_matches(prob):
    run = engine(prob, optimizer="ngd", steps=STEPS, lr=0.1, eps=2.0**-52)
    ref = np_optimize(
        prob, np.zeros((6, 6)), "W", optimizer="ngd", steps=STEPS, lr=0.1, eps=2.0**-52
    )
    assert worst_rel(run.W[1:], ref[1:]) <= TOL


@pytest.mark.parametrize("base,mirror,lr", [("gd", "md", 2.0), ("ngd", "nmd", 0.1)])
def test_p2_mirror_descent_is_gradient_descent(prob, base, mirror, lr):
    init = attsvm.default_init(prob, "W", seed=1)
    a = engine(prob, optimizer=base, steps=STEPS, lr=lr, init=init)
    b = engine(prob, optimizer=mirror, steps=STEPS, lr=lr, p=2.0, init=init)
    assert worst_rel(b.W, a.W) <= 1e-13


def test_a_binding_polyak_cap_is_a_gradient_step_at_the_cap():
    W = np.random.default_rng(0).standard_normal((3, 3))
    g = np.random.default_rng(1).standard_normal((3, 3))
    opt = O.make_optimizer("polyak")
    new, _ = opt.update(g, opt.init(W), W, O.Hyper(lr=1e3, cap=0.5, gap=1.0))
    np.testing.assert_allclose(np.asarray(new), W - 0.5 * g, rtol=1e-14)


def test_a_binding_polyak_step_bound_is_a_normalized_step():
    W = np.random.default_rng(0).standard_normal((3, 3))
    g = np.random.default_rng(1).standard_normal((3, 3))
    opt = O.make_optimizer("polyak")
    new, _ = opt.update(g, opt.init(W), W, O.Hyper(lr=1e3, max_step=0.05, gap=1.0))
    np.testing.assert_allclose(np.asarray(new), W - 0.05 * g / np.linalg.norm(g), rtol=1e-14)


def test_loss_infimum_is_the_limit_along_the_svm_direction(prob):
    Lstar = O.loss_infimum(prob)
    assert Lstar == pytest.approx(np_loss_infimum(prob, "logistic"), rel=1e-14)
    Wmm = attsvm.solve_att_svm(prob).W
    gaps = [np_objective(prob, R * Wmm, "W", "logistic") - Lstar for R in (1, 4, 16)]
    assert 0 < gaps[2] < gaps[1] < gaps[0] and gaps[2] < 1e-6


def test_loss_gap_equals_the_plain_difference_at_moderate_margins(prob):
    data = O.problem_data(prob)
    for seed in range(3):
        W = attsvm.default_init(prob, "W", seed=seed) * 3
        for loss in ("logistic", "exponential", "correlation"):
            direct = np_objective(prob, W, "W", loss) - np_loss_infimum(prob, loss)
            got = float(O.loss_gap(W, data, loss))
            assert got == pytest.approx(direct, rel=1e-12, abs=1e-15)


def test_loss_infimum_rejects_nonlinear_heads_and_infeasible_svms():
    with pytest.raises(ValueError, match="linear head"):
        O.loss_infimum(attsvm.random_problem(3, 4, 5, seed=0, head="relu"))
    prob = attsvm.random_problem(6, 8, 2, seed=0)  # d = 2: too few dimensions to separate
    assert not attsvm.solve_att_svm(prob).feasible
    with pytest.raises(ValueError, match="feasible Att-SVM"):
        O.loss_infimum(prob)


def test_update_functions_are_pure_and_traceable():
    """`update` is a pure function of its arguments (optax style): jit of one step equals
    the eager step, and the state counts updates."""
    import jax

    opt = O.make_optimizer("nmd")
    W = np.random.default_rng(0).standard_normal((3, 3))
    g = np.random.default_rng(1).standard_normal((3, 3))
    h = O.Hyper(lr=0.1, p=1.5, eps=0.0)
    s0 = opt.init(W)
    eager, s1 = opt.update(g, s0, W, h)
    jitted, s1j = jax.jit(opt.update)(g, s0, W, h)
    np.testing.assert_array_equal(np.asarray(eager), np.asarray(jitted))
    assert int(s1.count) == 1 and int(s1j.count) == 1
    # the dual is accumulated: U_1 = ∇ψ(W_0) − η g / ‖g‖_q
    q = 3.0
    U1 = np.sign(W) * np.abs(W) ** 0.5 - 0.1 * g / np.sum(np.abs(g) ** q) ** (1 / q)
    np.testing.assert_allclose(np.asarray(s1.dual), U1, rtol=1e-14)


def test_exactly_zero_gradient_takes_no_step_and_tiny_ones_still_normalize():
    W = np.ones((2, 2))
    for name in ("ngd", "nmd", "polyak", "spectral", "sign"):
        opt = O.make_optimizer(name)
        h = O.Hyper(lr=1.0, p=3.0, gap=0.1)
        new, _ = opt.update(np.zeros((2, 2)), opt.init(W), W, h)
        np.testing.assert_array_equal(np.asarray(new), W)
    g = np.array([[3e-300, -4e-300], [0.0, 0.0]])  # ‖g‖² underflows to 0
    opt = O.make_optimizer("ngd")
    new, _ = opt.update(g, opt.init(np.zeros((2, 2))), np.zeros((2, 2)), O.Hyper(lr=1.0))
    np.testing.assert_allclose(np.asarray(new), [[-0.6, 0.8], [0, 0]], rtol=1e-15)


@pytest.mark.parametrize(
    "kw,match",
    [
        (dict(optimizer="adam"), "`optimizer` must be"),
        (dict(optimizer="md", p=1.0), "`p` must be"),
        (dict(optimizer="nmd", p=math.inf), "`p` must be"),
        (dict(optimizer="gd", p=2.0), "`p` must be None unless"),
        (dict(optimizer="gd", lr=0.0), "`lr` must be"),
        (dict(optimizer="gd", steps=0), "`steps` must be"),
        (dict(optimizer="ngd", eps=-1.0), "`eps` must be"),
        (dict(optimizer="md", p=1.5, param="KQ"), "`optimizer` must be"),
        (dict(optimizer="gd", steps=10, record_every=3), "`record_every` must divide"),
        (dict(optimizer="gd", init=np.zeros((2, 2))), r"`init(\[0\])?` must be"),
        (dict(optimizer="gd", centred=1), "`centred` must be"),
    ],
)
def test_bad_arguments_are_rejected(kw, match):
    prob = attsvm.random_problem(2, 3, 3, seed=0)
    args = dict(steps=5, lr=0.1) | kw
    with pytest.raises(ValueError, match=match):
        attsvm.train(prob, **args)


def test_normalized_md_converges_toward_its_own_lp_svm():
    """The implicit-bias claim on one instance (settings of docs/followups.md §2.6): normalized
    ℓp-MD from W = 0, stopped at ‖W‖_F ≈ 300, has Frobenius cosine ≥ 0.99 with the ℓp-AttSVM
    at its own selection and a lower one with the ℓp' SVMs, p' ≠ p (measured: 0.9990 / 0.9998)."""
    prob = attsvm.random_problem(n=4, T=4, d=4, seed=0)
    ps = (1.25, 1.5, 2.0, 3.0)
    for p, lr, steps in [(1.5, 2e-3, 12_000), (3.0, 0.5, 84_000)]:
        W = attsvm.train(
            prob,
            optimizer="nmd",
            p=p,
            steps=steps,
            lr=lr,
            init=np.zeros((4, 4)),
            record_every=steps,
        ).W[-1]
        assert 250 < np.linalg.norm(W) < 400
        alpha = np.einsum("ntd,de,ne->nt", prob.X, W, prob.Z).argmax(1)
        cors = [
            attsvm.correlation(W, attsvm.solve_att_svm(prob, alpha, norm="lp", p=q).W) for q in ps
        ]
        assert cors[ps.index(p)] >= 0.99 and np.argmax(cors) == ps.index(p)


def test_polyak_runs_to_the_float64_floor_without_nan():
    """Polyak with the cancellation-free L − L* and centred gradient keeps converging until
    the non-selected softmax weights underflow, then stops (‖g‖ ≤ 2.2e-308 → no step): no
    NaN from η_k ≈ e^{margin} overflowing or from subnormal gradients (step ≈ 780 here)."""
    prob = attsvm.random_problem(n=6, T=8, d=10, seed=3)
    run = attsvm.train(
        prob, optimizer="polyak", steps=1500, lr=1.0, init=np.zeros((10, 10)), record_every=1500
    )
    W = run.W[-1]
    gap = float(O.loss_gap(W, O.problem_data(prob), "logistic"))
    assert np.all(np.isfinite(W)) and gap < 1e-300
    assert 1 - attsvm.correlation(W, attsvm.solve_att_svm(prob).W) < 1e-4


def test_subnormal_gradients_take_no_step():
    W = np.ones((2, 2))
    g = np.array([[3e-310, -4e-310], [0.0, 1e-320]])
    for name in ("ngd", "nmd", "polyak"):
        opt = O.make_optimizer(name)
        new, _ = opt.update(g, opt.init(W), W, O.Hyper(lr=1.0, p=1.5, gap=1e-300))
        np.testing.assert_array_equal(np.asarray(new), W)
