"""The benchmark script stays runnable and keeps comparing like with like (no timings
are asserted: speed is reported by `python -m benchmarks.bench`, not tested)."""

import numpy as np

from attsvm import problems
from attsvm.training import default_init, train
from benchmarks import bench


def test_numpy_loop_records_every_rth_step_of_the_same_trajectory():
    p = problems.random_problem(4, 5, 6, seed=3)
    init = default_init(p, "W")
    W1, S1, L1 = bench.numpy_gd(p, init, "W", steps=20, lr=0.1)
    W5, S5, L5 = bench.numpy_gd(p, init, "W", steps=20, lr=0.1, record_every=5)
    assert W5.shape == (5, 6, 6) and S5.shape == (5, 4, 5) and L5.shape == (5,)
    np.testing.assert_array_equal(W5, W1[::5])
    np.testing.assert_array_equal(L5, L1[::5])
    run = train(p, param="W", steps=20, lr=0.1, init=init, record_every=5)
    np.testing.assert_allclose(run.W, W5, rtol=0, atol=1e-13)


def test_records_only_writes_the_engines_record_shapes():
    W, s, L, g = bench.records_only(3, 7, 10, 6, 8)()
    assert W.shape == (3, 7, 10, 10) and s.shape == (3, 7, 6, 8)
    assert L.shape == g.shape == (3, 7)
    np.testing.assert_array_equal(W[:, :, 2, 3], np.broadcast_to(np.arange(7.0), (3, 7)))


def test_bench_gd_runs_and_agrees_with_the_loop(capsys):
    out = bench.bench_gd(runs=2, steps=20, loop_runs=1, repeats=1)
    for param in ("W", "KQ"):
        r = out[param]
        assert r["agree"] < 1e-12
        assert all(
            r[k] > 0
            for k in ("warm", "warm_sparse", "warm_compute", "floor", "loop_full", "loop_sparse")
        )
        assert r["exact_cost"] > 0
    text = capsys.readouterr().out
    assert "floor: writing the same 2×21 records" in text
    assert "the exact default gradient costs" in text
