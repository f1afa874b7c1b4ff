"""attsvm.pairjax: the pair constraints' products on JAX's device against the numpy ones
(plain loops check those, tests/test_pairsvm.py), and the certified solvers run on them.
On this CPU "jax" is forced; "auto" takes it only on an accelerator."""

from __future__ import annotations

import jax
import numpy as np
import pytest

import attsvm
from attsvm import pairjax, pairsvm
from attsvm.problems import optimal_tokens
from attsvm.svm import problem_pairs, problem_tokens


def problem(n, T, d, queries, seed=0, lengths=None):
    prob = attsvm.random_problem(n, T, d, seed=seed, queries=queries)
    if lengths is not None:  # padded sequences: the token form must skip the padding
        prob = prob.with_(lengths=np.array(lengths))
    alpha = optimal_tokens(prob)
    D, Z, query, idx = problem_pairs(prob, alpha)
    return D, Z, query, problem_tokens(prob, alpha, idx)


@pytest.mark.parametrize("with_tokens", [False, True])
@pytest.mark.parametrize(
    "queries, lengths", [("single", None), ("sequence", None), ("single", [7, 3, 5, 7, 4, 6])]
)
def test_device_products_match_numpy(queries, lengths, with_tokens):
    D, Z, query, tokens = problem(6, 7, 5, queries, lengths=lengths)
    tokens = tokens if with_tokens else None
    ref = pairsvm.Pairs(D, Z, query, tokens, "numpy")
    dev = pairsvm.Pairs(D, Z, query, tokens, "jax")
    assert (ref.products, dev.products) == ("numpy", "jax")
    rng = np.random.default_rng(1)
    W, lam = rng.standard_normal((5, 5)), rng.uniform(0, 1, len(D))
    for a, b in (
        (dev.margins(W), ref.margins(W)),
        (dev.combine(lam), ref.combine(lam)),
        (dev.gram(lam), ref.gram(lam)),
    ):
        assert a.dtype == np.float64 and a.shape == b.shape
        assert np.allclose(a, b, rtol=1e-12, atol=1e-12 * np.abs(b).max())
    sub = dev.subset(np.arange(0, len(D), 2))
    assert sub.products == "jax"
    assert np.allclose(sub.margins(W), ref.margins(W)[::2], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    "norm, n, T, d, queries", [("fro", 12, 12, 16, "single"), ("nuc", 8, 8, 12, "sequence")]
)
def test_the_solvers_on_device_products_certify_the_same_solution(norm, n, T, d, queries):
    D, Z, query, tokens = problem(n, T, d, queries)
    ref = pairsvm.solve_pairs(D, Z, query, norm, tokens=tokens, products="numpy")
    dev = pairsvm.solve_pairs(D, Z, query, norm, tokens=tokens, products="jax")
    assert dev.feasible and dev.status == ref.status == "optimal"
    assert dev.gap <= 1e-9 and dev.min_margin >= 1 - 1e-9
    assert dev.objective == pytest.approx(ref.objective, rel=1e-8)


def test_auto_takes_jax_only_on_an_accelerator_and_for_large_problems():
    assert pairjax.pick("auto", m=10, d=4, d2=4, q=2) == "numpy"
    big = pairjax.pick("auto", m=100_000, d=128, d2=128, q=100)
    assert big == ("numpy" if jax.default_backend() == "cpu" else "jax")
    assert pairjax.pick("jax", m=10, d=4, d2=4, q=2) == "jax"
    with pytest.raises(ValueError, match="`products` must be one of"):
        pairjax.pick("gpu", m=10, d=4, d2=4, q=2)
