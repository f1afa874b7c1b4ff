"""The optimizer experiments (lp-mirror-descent, adaptive-steps) at a tiny size, their prices,
and the CLI."""
from __future__ import annotations

import json

import pandas as pd
import pytest

import attsvm
from attsvm import experiments, limits
from attsvm.__main__ import main
from attsvm.experiments import budget

TINY = {
    "lp-mirror-descent": dict(runs=2, ps=(1.5, 3.0), steps=2000, record_every=250,
                              radius=30.0),
    "adaptive-steps": dict(runs=2, steps=400, record_every=10),
}


@pytest.fixture(scope="module")
def tiny():
    return {name: experiments.run(name, **kw) for name, kw in TINY.items()}


def test_lp_mirror_descent_tiny(tiny):
    res = tiny["lp-mirror-descent"]
    by_p, runs = res.frames["by_p"], res.frames["runs"]
    assert list(by_p.p) == [1.5, 3.0] and len(runs) == 4
    assert set(res.frames["correlations"].p_svm) == {1.5, 3.0}
    assert by_p.share_opt.between(0, 1).all()
    # even this short run is closer to its own SVM than to the other p's
    assert runs.own_highest.all(), runs
    assert "2410.14581" in res.summary["text"]
    json.dumps(experiments.core.jsonable(res.summary))
    # steepest descent: one row per (instance, rule, norm), the open cells said to be open
    st, tab = res.frames["steepest"], res.frames["steepest_table"]
    assert len(st) == 2 * 3 * 3 and set(tab.norm) == {"fro", "max", "spectral"}
    assert st.margin_ratio.dropna().between(0, 1 + 1e-6).all()
    assert "open for attention" in res.summary["text"] and "2502.04664" in res.summary["text"]
    ok = st.dropna()
    assert (ok["corr"] <= 1 + 1e-12).all() and len(ok) > 0


def test_margin_ratio_is_one_at_the_svm_and_below_elsewhere():
    """The steepest table's measure, against its definition: W^mm itself scores 1 in its
    own norm; the Frobenius SVM scores ≤ 1 in the ℓ∞ norm."""
    from attsvm.svm import constraint_rows, matrix_norm
    prob = attsvm.random_problem(4, 4, 4, seed=0)
    alpha = attsvm.optimal_tokens(prob)
    A, _ = constraint_rows(prob, alpha)
    for norm in ("fro", "max", "spectral"):
        sol = attsvm.solve_att_svm(prob, alpha, norm=norm)
        ratio = (A @ sol.W.ravel()).min() / matrix_norm(sol.W, norm) * sol.objective
        assert ratio == pytest.approx(1.0, abs=1e-6)
    fro = attsvm.solve_att_svm(prob, alpha, norm="fro").W
    mx = attsvm.solve_att_svm(prob, alpha, norm="max")
    assert (A @ fro.ravel()).min() / matrix_norm(fro, "max") * mx.objective <= 1 + 1e-6


def test_adaptive_steps_tiny_ngd_and_polyak_beat_gd(tiny):
    res = tiny["adaptive-steps"]
    t = res.frames["table"].set_index("optimizer")
    assert t.loc["ngd", "reached_0.99"] == 1.0 and t.loc["polyak", "reached_0.99"] == 1.0
    assert t.loc["gd", "reached_0.99"] == 0.0       # GD: logarithmic rate
    assert t.loc["polyak", "off_mass_at"] < t.loc["gd", "off_mass_at"]
    assert "GD/NGD ≥" in res.summary["text"] and "2402.05738" in res.summary["text"]
    assert {r["optimizer"] for r in res.summary["ratios"]} == {"ngd", "polyak"}


@pytest.mark.parametrize("name,bad,word", [
    ("lp-mirror-descent", dict(ps=(1.0,)), "ps"),
    ("lp-mirror-descent", dict(lrs=(0.1,)), "lrs"),
    ("lp-mirror-descent", dict(steps=100, record_every=30), "record_every"),
    ("adaptive-steps", dict(thresholds=(1.0,)), "thresholds"),
    ("adaptive-steps", dict(lr_gd=0.0), "lr_gd"),
])
def test_bad_settings_are_refused_by_name(name, bad, word):
    with pytest.raises(ValueError, match=word):
        experiments.settings(name, **bad)


def test_prices_follow_budget_convention(monkeypatch):
    for name in TINY:
        s = experiments.settings(name)
        items, floats, sizes = budget.PRICES[name](s)
        assert all(isinstance(w, str) and v > 0 for w, v in items)
        assert floats > 0 and {"n", "T", "d", "steps", "runs", "solves"} <= set(sizes)
    monkeypatch.setenv("ATTSVM_MODE", "hosted")
    for name in TINY:          # the defaults fit the hosted caps …
        budget.check(name, experiments.settings(name))
    with pytest.raises(limits.BudgetError):   # … 10⁶ steps do not
        experiments.run("adaptive-steps", steps=1_000_000, record_every=1000)


def test_cli_writes_csv_chart_and_summary(tmp_path, capsys):
    assert main(["reproduce", "adaptive-steps", "--runs", "2", "--steps", "200", "--set",
                 "record_every=10", "--out", str(tmp_path), "--quiet", "--no-png"]) == 0
    out = tmp_path / "adaptive-steps"
    for f in ("table.csv", "runs.csv", "curves.csv", "settings.json", "chart.html"):
        assert (out / f).is_file(), f
    assert len(pd.read_csv(out / "table.csv")) == 3
    assert "adaptive-steps" in capsys.readouterr().out
