"""Many sessions share one server process: concurrent library calls from threads (as
Streamlit runs sessions) must give the same answers as one at a time, without errors."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import attsvm


@pytest.mark.parametrize("solver", ["CLARABEL", "SCS"])
def test_concurrent_svm_solves_of_one_shape_agree_with_sequential_ones(solver):
    probs = [attsvm.random_problem(n=4, T=4, d=4, seed=s) for s in range(8)]
    solve = lambda p: attsvm.solve_att_svm(p, norm="nuc", solver=solver)  # noqa: E731
    alone = [solve(p) for p in probs]
    with ThreadPoolExecutor(max_workers=8) as pool:
        together = list(pool.map(solve, probs * 3))
    # SCS stops at ~1e-4 accuracy (and warm-starts from the previous solve of a shape), so
    # only a wrong problem's answer, not rounding, can break its looser tolerance.
    tol = dict(rtol=1e-6, atol=1e-8) if solver == "CLARABEL" else dict(rtol=1e-2, atol=1e-3)
    for k, sol in enumerate(together):
        ref = alone[k % len(probs)]
        assert sol.status == ref.status
        np.testing.assert_allclose(sol.W, ref.W, **tol)


def test_concurrent_gd_runs_agree_with_sequential_ones():
    probs = [attsvm.random_problem(n=3, T=4, d=5, seed=s) for s in range(6)]
    run = lambda p: attsvm.train(p, steps=50, record_every=50).W[-1]  # noqa: E731
    alone = [run(p) for p in probs]
    with ThreadPoolExecutor(max_workers=6) as pool:
        together = list(pool.map(run, probs))
    for a, b in zip(alone, together, strict=True):
        np.testing.assert_array_equal(a, b)
