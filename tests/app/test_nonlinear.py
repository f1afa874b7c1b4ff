"""Nonlinear heads: generalized SVM beats W^dir beats the one-token SVM on the default."""

from conftest import assert_clean, chart_specs, charts, open_page, table, texts


def _one_minus_corr(at):
    return {m.label.replace("1 − corr with ", ""): float(m.value) for m in at.metric}


def test_default_shows_the_papers_ordering():
    at = open_page("nonlinear.py")
    m = _one_minus_corr(at)
    assert m["W^fin + R_k·W^dir (generalized SVM)"] < m["W^dir alone"] < m["one-token SVM W^mm_α"]
    assert len(charts(at)) == 2
    sets = table(at, "|O_i|")
    assert sets["|O_i|"].max() >= 2  # several tokens kept somewhere


def test_controls_change_the_output():
    at = open_page("nonlinear.py", query={"nl_steps": 500})
    before = chart_specs(at)
    at.selectbox(key="nl_head").set_value("quadratic").run()
    assert_clean(at)
    assert chart_specs(at) != before
    at.number_input(key="nl_seed").set_value(5).run()  # all singletons: reduces
    assert_clean(at)
    assert "reduces to the one-token" in texts(at) or "O_i" in texts(at)


def test_T_equal_1_is_explained():
    at = open_page("nonlinear.py", query={"nl_T": 1})
    assert "nothing to select" in texts(at) and not at.error


def test_over_budget_is_refused(tiny_budget):
    at = open_page("nonlinear.py")
    assert at.error
