"""Every experiment is priced as a whole before it starts; over budget it is refused at once,
naming what to lower and the largest value that fits."""

from __future__ import annotations

import re
import time
from types import SimpleNamespace

import pytest

from attsvm import experiments, limits
from attsvm.experiments import budget

HOSTED, LOCAL = limits.LIMITS["hosted"], limits.LIMITS["local"]

# The escapes: each computed for minutes in hosted mode instead of being refused.
ESCAPES = [
    ("regularization-path", dict(n=32, T=32, d=32)),
    ("svm-rank", dict(pairs=((32, 32),), ds=(64,), runs=2, max_draws=2)),
    ("overparameterization", dict(n=32, T=32, ds=(32,), runs=2)),
    ("sequence-causal", dict(n=16, T=16, d=64, runs=4)),
    ("local-convergence", dict(runs=500)),
    ("multi-token", dict(ds=(64,), runs=20)),
]


@pytest.mark.parametrize("name", experiments.EXPERIMENTS + experiments.FOLLOWUPS)
def test_every_experiment_has_a_positive_price_and_its_defaults_fit_local_mode(name):
    p = experiments.price(name)
    assert p.work > 0 and p.items and all(w >= 0 for _, w in p.items)
    budget.check(name, experiments.settings(name), limits_=LOCAL)


@pytest.mark.parametrize("name,kw", ESCAPES, ids=[e[0] for e in ESCAPES])
def test_hostile_settings_are_refused_in_hosted_mode_within_a_second(name, kw):
    s = experiments.settings(name, **kw)
    t0 = time.perf_counter()
    with pytest.raises(limits.BudgetError, match=f"^{name} with these settings asks for"):
        budget.check(name, s, limits_=HOSTED)
    assert time.perf_counter() - t0 < 1.0


def _hints(msg: str) -> dict:
    return {k: int(v.replace(",", "")) for k, v in re.findall(r"`(\w+)` (?:≤|up to) ([\d,]+)", msg)}


@pytest.mark.parametrize(
    "name,kw",
    [
        ("local-convergence", {}),
        ("local-convergence", dict(runs=300, steps=4000)),
        ("overparameterization", {}),
        ("multi-token", {}),
        ("sequence-causal", dict(runs=400)),
        ("regularization-path", dict(radii=200)),
    ],
)
def test_each_hint_is_the_largest_value_that_fits(name, kw):
    s = experiments.settings(name, **kw)
    with pytest.raises(limits.BudgetError) as err:
        budget.check(name, s, limits_=HOSTED)
    hints = _hints(str(err.value))
    assert hints, str(err.value)
    fields = {f: getattr(s, f) for f in s.__dataclass_fields__}
    for field, best in hints.items():

        def at(x):
            v = tuple(g for g in getattr(s, field) if g <= x) if field == "ds" else x
            return SimpleNamespace(**{**fields, field: v})

        assert budget._fits(name, at(best), HOSTED), (field, best)
        nxt = best + 1 if field != "ds" else min(g for g in s.ds if g > best)
        assert not budget._fits(name, at(nxt), HOSTED), (field, nxt)
        experiments.settings(name, **{**kw, field: getattr(at(best), field)})  # valid


def test_the_paper_defaults_that_fit_hosted_mode_still_run_there():
    for name in ("geometry-1", "geometry-2", "regularization-path", "sequence-causal"):
        budget.check(name, experiments.settings(name), limits_=HOSTED)


def test_price_adds_gd_and_every_solver():
    s = experiments.settings("local-convergence", runs=10, steps=100, record_every=10)
    p = budget.price("local-convergence", s)
    gd = sum(limits.gd_work(n=6, T=8, d=10, steps=100, runs=10, param=q) for q in ("W", "KQ"))
    svm = sum(limits.bulk_svm_work(n=6, T=8, d=10, norm=nm, solves=20) for nm in ("fro", "nuc"))
    assert p.work == pytest.approx(gd + svm)
    assert p.floats == limits.record_floats(n=6, T=8, d=10, steps=100, record_every=10, runs=10)


def test_run_refuses_before_any_work(monkeypatch):
    from attsvm.experiments import regularization_path

    monkeypatch.setattr(limits, "current", lambda: HOSTED)
    monkeypatch.setattr(regularization_path, "run", lambda *a, **k: pytest.fail("work started"))
    with pytest.raises(limits.BudgetError, match="regularization-path"):
        experiments.run("regularization-path", n=32, T=32, d=32)


def test_ntp_experiments_are_priced_once_by_their_record(monkeypatch):
    """The registry refuses with the record's `price`; `run` prices nothing a second time."""
    from attsvm.experiments import ntp

    for f in ("check_gd", "check_svm", "check_work", "svm_work", "graph_svm_work"):
        monkeypatch.setattr(limits, f, lambda *a, f=f, **k: pytest.fail(f"run called {f}"))
    for run, Settings in ((ntp.run_global, ntp.Settings), (ntp.run_local, ntp.LocalSettings)):
        assert len(run(Settings(instances=1, steps=100)).frames["instances"]) == 1


def test_bulk_and_sphere_prices_grow_with_every_size():
    for f in (limits.bulk_svm_work, limits.sphere_work):
        base = f(n=4, T=4, d=4)
        for k in ("n", "T", "d"):
            assert f(**{**dict(n=4, T=4, d=4), k: 8}) > base, (f.__name__, k)


def test_graph_svm_price_bounds_the_rows_and_refuses_the_big_page_and_experiment(monkeypatch):
    """The Graph-SVM's price counts r = n·(T − 1) margin rows (one per label → other-token
    edge, an upper bound), and the sizes that took minutes to solve (n = T = 32, d = 64: 211 s
    here) are refused in hosted mode, on the page and in both experiments."""
    from attsvm.ntp import random_ntp_problem, session
    from attsvm.ntp.graph import priority_graphs
    from attsvm.ntp.svm import constraint_rows

    for n, T, K, d, seed in [(6, 4, 6, 8, 0), (12, 6, 10, 12, 1), (20, 8, 16, 16, 2)]:
        p = random_ntp_problem(n=n, T=T, K=K, d=d, seed=seed)
        assert len(constraint_rows(p, priority_graphs(p))[0]) <= n * (T - 1)
    assert limits.graph_svm_work(n=32, T=32, d=64) > 100 * limits.svm_work(n=32, T=32, d=1)
    big = random_ntp_problem(n=32, T=32, K=64, d=64, seed=0)
    monkeypatch.setenv("ATTSVM_MODE", "hosted")
    with pytest.raises(limits.BudgetError, match="Graph-SVM"):
        session.check_budget(big, 100)
    for name in ("ntp-global", "ntp-local"):
        s = experiments.settings(name, n=32, T=32, K=64, d=64, instances=1, steps=100)
        with pytest.raises(limits.BudgetError):
            budget.check(name, s, limits_=HOSTED)
