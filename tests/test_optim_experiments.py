"""The optimizer experiments (lp-mirror-descent, adaptive-steps): their measures, prices,
and the CLI."""

from __future__ import annotations

import pandas as pd
import pytest

import attsvm
from attsvm import experiments, limits
from attsvm.__main__ import main
from attsvm.experiments import budget


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


@pytest.mark.parametrize(
    "name,bad,word",
    [
        ("lp-mirror-descent", dict(ps=(1.0,)), "ps"),
        ("lp-mirror-descent", dict(lrs=(0.1,)), "lrs"),
        ("lp-mirror-descent", dict(steps=100, record_every=30), "record_every"),
        ("adaptive-steps", dict(thresholds=(1.0,)), "thresholds"),
        ("adaptive-steps", dict(lr_gd=0.0), "lr_gd"),
    ],
)
def test_bad_settings_are_refused_by_name(name, bad, word):
    with pytest.raises(ValueError, match=word):
        experiments.settings(name, **bad)


def test_prices_follow_budget_convention(monkeypatch):
    for name in ("lp-mirror-descent", "adaptive-steps"):
        s = experiments.settings(name)
        items, floats, sizes = experiments.record(name).price(s)
        assert all(isinstance(w, str) and v > 0 for w, v in items)
        assert floats > 0 and {"n", "T", "d", "steps", "runs", "solves"} <= set(sizes)
    monkeypatch.setenv("ATTSVM_MODE", "hosted")
    for name in ("lp-mirror-descent", "adaptive-steps"):  # the defaults fit the hosted caps …
        budget.check(name, experiments.settings(name))
    with pytest.raises(limits.BudgetError):  # … 10⁶ steps do not
        experiments.run("adaptive-steps", steps=1_000_000, record_every=1000)


def test_cli_writes_csv_chart_and_summary(tmp_path, capsys):
    assert (
        main(
            [
                "reproduce",
                "adaptive-steps",
                "--runs",
                "2",
                "--steps",
                "200",
                "--set",
                "record_every=10",
                "--out",
                str(tmp_path),
                "--quiet",
                "--no-png",
            ]
        )
        == 0
    )
    out = tmp_path / "adaptive-steps"
    for f in ("table.csv", "runs.csv", "curves.csv", "settings.json", "chart.html"):
        assert (out / f).is_file(), f
    assert len(pd.read_csv(out / "table.csv")) == 3
    assert "adaptive-steps" in capsys.readouterr().out
