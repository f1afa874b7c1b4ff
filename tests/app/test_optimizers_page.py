"""Optimizer → norm: the race draws its heat map, labels each cell proved/open with its
citation, reacts to its controls, and refuses an over-budget race before computing."""

from conftest import assert_clean, chart_specs, charts, open_page, table, texts

SMALL = {"opt_steps": 500, "n": 3, "T": 4, "d": 4}


def test_page_loads_with_heat_map_status_and_selections():
    at = open_page("optimizers.py", query=SMALL)
    assert len(charts(at)) == 2  # heat map, ‖W‖ growth
    reach = table(at, "citation").set_index("optimizer")
    assert reach.loc["NGD", "target"] == "Frobenius"
    assert "proved" in reach.loc["NGD", "status"] and "2402.05738" in reach.loc["NGD", "citation"]
    assert "open" in reach.loc["signGD", "status"]
    assert "2410.14581" in reach.loc["normalized ℓp-MD", "citation"]
    assert len(table(at, "α")) == 4
    assert "Selected tokens" in texts(at)


def test_controls_change_the_race():
    at = open_page("optimizers.py", query=SMALL)
    before = chart_specs(at)
    at.multiselect(key="opt_names").set_value(["gd", "ngd"]).run()
    assert_clean(at)
    assert chart_specs(at) != before
    assert set(table(at, "citation").optimizer) == {"GD", "NGD"}
    at.radio(key="opt_measure").set_value("margin ratio").run()
    assert_clean(at)
    at.multiselect(key="opt_names").set_value([]).run()
    assert "Pick at least one" in texts(at)


def test_over_budget_is_refused(tiny_budget):
    at = open_page("optimizers.py", query=SMALL)
    assert at.error and not charts(at)


def test_polyak_is_left_out_for_a_nonlinear_head():
    at = open_page("optimizers.py", query={**SMALL, "head": "relu"})
    at.multiselect(key="opt_names").set_value(["gd", "polyak", "sign"]).run()
    assert_clean(at)
    assert "left out" in texts(at) and not at.error
    assert set(table(at, "α").optimizer) == {"GD", "signGD"}
