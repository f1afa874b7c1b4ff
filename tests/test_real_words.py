"""The `real-words` experiment at a tiny size: its frames, chart, price and refusals."""
from __future__ import annotations

import numpy as np
import pytest

from attsvm import experiments, limits
from attsvm.experiments import budget

TINY = dict(tasks=("polar", "topic"), n=10, steps=200, record_every=50, ds=(4, 50), subsets=3,
            subset_n=6)


@pytest.fixture(scope="module")
def res():
    return experiments.run("real-words", **TINY)


def test_tiny_run_reports_selection_correlation_and_feasibility(res):
    runs, feas, curves = res.frames["runs"], res.frames["feasibility"], res.frames["curves"]
    assert list(runs["task"]) == ["polar", "topic"] and list(runs["sentences"]) == [10, 10]
    assert np.all((runs["selected_is_key"] >= 0) & (runs["selected_is_key"] <= 1))
    assert set(runs["verdict"]) <= {"global", "local", "feasible", "infeasible"}
    assert set(feas["d"]) == {4, 50} and len(feas) == 4
    assert (feas["subsets"] + feas["ties"] == 3).all()
    assert set(curves["step"]) == {0, 50, 100, 150, 200}
    assert "polar: GD selects the key word in" in res.summary["text"]
    assert "real-words" in experiments.FOLLOWUPS and "real-words" not in experiments.EXPERIMENTS


def test_chart_builds(res):
    from attsvm_charts import experiments as charts
    spec = charts.chart(res).to_dict()
    assert "vconcat" in spec


def test_price_grows_with_the_work_and_hosted_mode_refuses_the_full_run():
    small = experiments.price("real-words", **TINY)
    full = experiments.price("real-words")
    assert 0 < small.work < full.work
    with pytest.raises(limits.BudgetError, match="^real-words with these settings asks for"):
        budget.check("real-words", experiments.settings("real-words"),
                     limits_=limits.LIMITS["hosted"])
    budget.check("real-words", experiments.settings("real-words", **TINY),
                 limits_=limits.LIMITS["hosted"])


@pytest.mark.parametrize("kw, field", [
    (dict(tasks=("sarcasm",)), "`tasks`"), (dict(ds=(0,)), "`ds`"), (dict(query="last"), "`query`"),
    (dict(n=1), "`n`"),
])
def test_bad_settings_name_the_field(kw, field):
    with pytest.raises(ValueError, match=field):
        experiments.settings("real-words", **kw)
