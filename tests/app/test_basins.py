"""Local optima and basins: selection table, landing bars, basin map; limits explained."""

from conftest import assert_clean, chart_specs, charts, open_page, texts


def _counts(at):
    return {m.label: int(m.value) for m in at.metric}


def test_default_problem_has_global_and_local_optima_and_two_basins():
    at = open_page("basins.py", query={"bas_runs": 16, "bas_grid": 6})
    c = _counts(at)
    assert sum(c.values()) == 27  # 3^3 selections
    assert c["global (α = opt)"] == 1 and c["locally optimal"] >= 1
    assert len(charts(at)) == 2
    assert "of starts reach the global selection" in texts(at)


def test_controls_change_the_output():
    at = open_page("basins.py", query={"bas_runs": 16, "bas_grid": 6})
    before = chart_specs(at)
    at.number_input(key="bas_radius").set_value(0.5).run()
    assert_clean(at)
    assert chart_specs(at) != before
    at.number_input(key="bas_T").set_value(2).run()
    assert_clean(at)
    assert sum(_counts(at).values()) == 8


def test_too_many_selections_is_an_error():
    at = open_page("basins.py", query={"bas_n": 8, "bas_T": 16})
    assert at.error and "Too many selections" in at.error[0].value


def test_T_equal_1_is_explained():
    at = open_page("basins.py", query={"bas_T": 1})
    assert "nothing to choose" in texts(at) and not at.error
