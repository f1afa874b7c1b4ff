"""Over-parameterization: the d sweep draws fractions; an empty choice is explained."""

from conftest import assert_clean, chart_specs, charts, open_page, table, texts


def test_sweep_draws_fractions_per_d():
    at = open_page("overparam.py", query={"ovp_runs": 3, "steps": 100})
    assert len(charts(at)) == 1
    fractions = table(at, "d")
    assert list(fractions["d"]) == [2, 4, 8, 12]
    values = fractions.drop(columns="d")
    assert ((values >= 0) & (values <= 1)).all().all()


def test_controls_change_the_sweep():
    at = open_page("overparam.py", query={"ovp_runs": 3, "steps": 100})
    before = chart_specs(at)
    at.multiselect(key="ovp_d").set_value([2, 4]).run()
    assert_clean(at)
    assert chart_specs(at) != before
    assert list(table(at, "d")["d"]) == [2, 4]
    at.multiselect(key="ovp_d").set_value([]).run()
    assert_clean(at)
    assert "Pick at least one" in texts(at)


def test_over_budget_sweep_is_refused(tiny_budget):
    at = open_page("overparam.py", query={"ovp_runs": 3})
    assert at.error and not charts(at)
