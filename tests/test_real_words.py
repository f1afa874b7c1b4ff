"""The `real-words` experiment at a tiny size: its frames, chart, price and refusals."""

from __future__ import annotations

import numpy as np
import pytest

from attsvm import experiments, limits
from attsvm.experiments import budget

TINY = dict(
    tasks=("polar", "topic"), n=10, steps=200, record_every=50, ds=(4, 50), subsets=3, subset_n=6
)


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
        budget.check(
            "real-words", experiments.settings("real-words"), limits_=limits.LIMITS["hosted"]
        )
    budget.check(
        "real-words", experiments.settings("real-words", **TINY), limits_=limits.LIMITS["hosted"]
    )


@pytest.mark.parametrize(
    "kw, field",
    [
        (dict(tasks=("sarcasm",)), "`tasks`"),
        (dict(ds=(0,)), "`ds`"),
        (dict(query="last"), "`query`"),
        (dict(n=1), "`n`"),
    ],
)
def test_bad_settings_name_the_field(kw, field):
    with pytest.raises(ValueError, match=field):
        experiments.settings("real-words", **kw)


def test_the_pages_study_is_the_experiments_fit(res):
    # The Real words page's study (`real_words.study`) runs the experiment's own `fit`: on
    # the same sentences and GD settings, its selection and final correlation are the run's.
    from attsvm import text
    from attsvm.experiments import real_words

    sents, labels, keys = (list(x[:10]) for x in text.task("polar"))
    s = real_words.Study(
        sentences=tuple(sents),
        labels=tuple(labels),
        keys=tuple(keys),
        head=text.TASKS["polar"][1],
        steps=200,
    )
    out = real_words.study(s)
    row = res.frames["runs"].set_index("task").loc["polar"]
    assert out.fit.verdict == row["verdict"]
    assert np.isclose(out.fit.corr[-1], row["final_corr"], rtol=0, atol=1e-12)
    sel = out.words[out.words.selected]
    assert len(sel) == 10 and np.isclose(sel.key.mean(), row["selected_is_key"])
    assert list(out.feasibility["d"]) == list(real_words.PCA_DS)
    items, _ = real_words.study_price(s, n=out.tp.problem.n, T=out.tp.problem.T)
    assert sum(w for _, w in items) > 0


@pytest.mark.parametrize(
    "kw, field",
    [
        (dict(d=0), "`d`"),
        (dict(param="V"), "`param`"),
        (dict(keys=("a",)), "`keys`"),
        (dict(lr=-1.0), "`lr`"),
    ],
)
def test_the_pages_bad_settings_name_the_field(kw, field):
    from attsvm.experiments import real_words

    with pytest.raises(ValueError, match=field):
        real_words.Study(sentences=("good film", "bad film"), labels=(1.0, -1.0), **kw)
