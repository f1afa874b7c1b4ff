"""The engine's optimizer options (`attsvm.train(optimizer=…)`; every rule is held to a plain
numpy loop in tests/test_optimizers.py): the default is normalized GD with exact gradients
(centred, ε = 0), the authors' gradient an option; saturation and underflow."""

from __future__ import annotations

import numpy as np
import pytest

import attsvm
from attsvm import optimizers as O
from attsvm.engine import compile_count

PROB = attsvm.random_problem(n=3, T=4, d=5, seed=1)
STEPS = 50


def _init(param):
    return attsvm.default_init(PROB, param, seed=0)


CASES = [("W", name, p) for name in O.OPTIMIZERS for p in ((1.5, 3.0) if "md" in name else (None,))]
CASES += [("KQ", name, None) for name in O.KQ_OPTIMIZERS]


def test_md_with_p_2_is_gd_in_the_engine():
    a = attsvm.train(PROB, optimizer="md", p=2.0, steps=STEPS, lr=0.1, init=_init("W"))
    b = attsvm.train(PROB, optimizer="gd", steps=STEPS, lr=0.1, init=_init("W"))
    np.testing.assert_allclose(a.W, b.W, rtol=1e-13, atol=1e-15)


def test_default_is_exact_normalized_gd_and_new_values_do_not_recompile():
    a = attsvm.train(PROB, steps=STEPS, lr=0.1, record_every=STEPS)
    b = attsvm.train(
        PROB, steps=STEPS, lr=0.1, record_every=STEPS, optimizer="ngd", eps=0.0, centred=True
    )
    np.testing.assert_array_equal(a.W, b.W)
    assert a.settings["optimizer"] == "ngd" and a.settings["eps"] == 0.0
    assert a.settings["centred"] and a.saturation_tol == 1e-300
    auth = attsvm.train(PROB, steps=STEPS, lr=0.1, record_every=STEPS, **O.AUTHORS_GRADIENT)
    assert auth.settings["eps"] == 2.0**-52 and not auth.settings["centred"]
    assert auth.saturation_tol == 1e-13
    attsvm.train(PROB, steps=STEPS, lr=0.1, record_every=STEPS, optimizer="nmd", p=1.5)
    n = compile_count()
    for lr, p, eps in ((0.2, 3.0, 0.0), (0.05, 1.25, 1e-8)):  # traced: one program
        attsvm.train(PROB, steps=STEPS, lr=lr, record_every=STEPS, optimizer="nmd", p=p, eps=eps)
    assert compile_count() == n
    c = attsvm.train(PROB, steps=STEPS, lr=0.1, record_every=STEPS, normalized=False)
    assert c.settings["optimizer"] == "gd"


def test_the_centred_gradient_keeps_the_direction_converging_past_saturation():
    """NGD with the exact normalized step: the centred engine keeps approaching W^mm where
    the authors' form (plain gradient, ε = 2⁻⁵²) stalls (docs/followups.md §4b)."""
    prob = attsvm.random_problem(n=6, T=8, d=10, seed=0)
    W0 = np.zeros((10, 10))
    kw = dict(steps=6000, lr=0.1, init=W0, record_every=1000)
    new = attsvm.train(prob, **kw)  # the default: exact
    old = attsvm.train(prob, **O.AUTHORS_GRADIENT, **kw)
    sol = attsvm.solve_att_svm(prob, new.alpha, "fro")
    err = lambda tr: [1 - attsvm.correlation(W, sol.W) for W in tr.W[1:]]  # noqa: E731
    e_new, e_old = err(new), err(old)  # at steps 1000, 2000, …, 6000
    print("1 - corr, centred exact:", e_new, "authors' form:", e_old)
    assert e_new[-1] < e_new[1] / 5  # still falling after step 2000
    assert e_new[-1] < e_old[-1] / 5


def test_a_zero_gradient_takes_no_step_with_eps_0():
    """ε = 0 never divides by 0: identical tokens give ∇L = 0 exactly; W stays put."""
    base = attsvm.random_problem(n=2, T=3, d=3, seed=0)
    X = np.repeat(base.X[:, :1], 3, axis=1)
    prob = base.with_(X=X)
    for name in ("ngd", "nmd", "sign", "spectral"):  # (polyak needs a feasible Att-SVM)
        p = 1.5 if name == "nmd" else None
        tr = attsvm.train(prob, optimizer=name, p=p, steps=5, lr=0.1, record_every=1)
        assert np.all(np.isfinite(tr.W)) and tr.overflow_at == -1
        # nmd: W = ∇ψ⁻¹(∇ψ(W₀)) is W₀ to an ulp, then no step
        np.testing.assert_allclose(
            tr.W, np.broadcast_to(tr.W[0], tr.W.shape), rtol=1e-15 if name == "nmd" else 0, atol=0
        )


@pytest.mark.parametrize(
    "bad,word",
    [
        (dict(optimizer="adam"), "optimizer"),
        (dict(optimizer="md", p=0.5), "p"),
        (dict(optimizer="ngd", p=1.5), "p"),
        (dict(eps=-1.0), "eps"),
        (dict(centred="yes"), "centred"),
        (dict(param="KQ", optimizer="spectral"), "optimizer"),
    ],
)
def test_bad_optimizer_settings_are_refused_by_name(bad, word):
    with pytest.raises(ValueError, match=f"`{word}`"):
        attsvm.train(PROB, steps=5, **bad)


def test_polyak_needs_the_linear_head():
    prob = attsvm.random_problem(n=2, T=3, d=3, seed=0, head="relu")
    with pytest.raises(ValueError, match="linear head"):
        attsvm.train(prob, steps=5, optimizer="polyak")


def test_normalized_md_keeps_converging_after_the_weights_underflow():
    """p = 1.25 reaches logit gaps > 745 (every non-selected weight underflows: ‖∇L‖ = 0 in
    float64) at ‖W‖_F ≈ 2.6e3 on this instance, at corr 0.973 with its ℓ1.25-AttSVM. The
    normalized step uses only ∇L's direction, computed divided by the largest non-selected
    weight, so MD keeps going (docs/followups.md §2.6; experiments/lp_mirror_descent.py)."""
    prob = attsvm.random_problem(4, 4, 4, seed=1)
    tr = attsvm.train(
        prob,
        optimizer="nmd",
        p=1.25,
        lr=1.5e-3,
        steps=20000,
        init=np.zeros((4, 4)),
        record_every=4000,
    )
    assert tr.grad_norm[-1] == 0.0 and tr.norms[-1] > 10 * 2.6e3
    alpha = np.einsum("ntd,de,ne->nt", prob.X, tr.W[-1], prob.Z).argmax(-1)
    sol = attsvm.solve_att_svm(prob, alpha, norm="lp", p=1.25)
    assert attsvm.correlation(tr.W[-1], sol.W) >= 0.99
