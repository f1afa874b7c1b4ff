"""Geometry in 2-D: the paper's figures, editable tokens, infeasible data explained."""
from conftest import assert_clean, chart_specs, charts, open_page


def _metrics(at):
    return {m.label: m.value for m in at.metric}


def test_geometry_1_reproduces_the_papers_correlations():
    at = open_page("geometry.py")
    m = _metrics(at)
    assert m["GD on W: selection"] == "0·2"
    w_fro, w_nuc = map(float, m["W-GD: corr with W^mm / W^mm_*"].split(" / "))
    kq_fro, kq_nuc = map(float, m["(K,Q)-GD: corr with W^mm / W^mm_*"].split(" / "))
    assert w_fro > 0.99 and kq_nuc > 0.999          # each parameterization, its own norm
    assert w_fro > w_nuc and kq_nuc > kq_fro
    assert len(charts(at)) == 2


def test_controls_change_the_figure():
    at = open_page("geometry.py")
    before = chart_specs(at)
    at.segmented_control(key="geo_src").set_value("geometry-2").run()
    assert_clean(at)
    assert chart_specs(at) != before
    at.segmented_control(key="geo_scale").set_value("direction").run()
    assert_clean(at)
    assert "W z_i/‖W‖" in chart_specs(at)[1]


def test_edited_nan_token_is_an_error_not_a_crash():
    at = open_page("geometry.py")
    at.session_state["geo_tok_geometry-1"] = {
        "edited_rows": {0: {"x₁": None}}, "added_rows": [], "deleted_rows": []}
    at.run()
    assert_clean(at)
    assert at.error and "finite" in at.error[0].value


def test_many_tokens_in_2d_explain_infeasibility():
    at = open_page("geometry.py", query={"geo_src": "random", "geo_n": 8, "geo_T": 12})
    assert any("infeasible" in w.value for w in at.warning)
