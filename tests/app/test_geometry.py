"""Geometry in 2-D: the paper's figures, editable tokens (kept in the link), infeasible
data explained."""

import numpy as np
import pytest
from conftest import assert_clean, chart_specs, charts, open_page, texts

import attsvm
from ui import linkdata


def _metrics(at):
    return {m.label: m.value for m in at.metric}


def test_geometry_1_reproduces_the_papers_correlations():
    at = open_page("geometry.py")
    m = _metrics(at)
    assert m["GD on W: selection"] == "0·2"
    w_fro, w_nuc = map(float, m["W-GD: corr with W^mm / W^mm_*"].split(" / "))
    kq_fro, kq_nuc = map(float, m["(K,Q)-GD: corr with W^mm / W^mm_*"].split(" / "))
    # each parameterization, its own norm. K Qᵀ: 0.998 at step 2,000 with the default exact
    # gradient; the authors' gradient shows > 0.999 only because its direction freezes
    # near step 500 (docs/library.md, Saturation)
    assert w_fro > 0.99 and kq_nuc > 0.99
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
        "edited_rows": {0: {"x₁": None}},
        "added_rows": [],
        "deleted_rows": [],
    }
    at.run()
    assert_clean(at)
    assert at.error and "finite" in at.error[0].value


def test_many_tokens_in_2d_explain_infeasibility():
    at = open_page("geometry.py", query={"geo_src": "random", "geo_n": 8, "geo_T": 12})
    assert any("infeasible" in w.value for w in at.warning)


def test_edits_go_into_the_link_and_a_link_restores_them():
    at = open_page("geometry.py")
    at.session_state["geo_tok_geometry-1"] = {
        "edited_rows": {1: {"x₁": 0.25}},
        "added_rows": [],
        "deleted_rows": [],
    }
    at.run()
    assert_clean(at)
    link = at.query_params["geo_data"]
    link = link[0] if isinstance(link, list) else link
    tag, X, Y, Z, v = linkdata.decode(link, max_n=8, max_T=12)
    g = attsvm.paper_problem("geometry-1")
    assert tag == "geometry-1" and X[0, 1, 0] == 0.25
    want = g.X.copy()
    want[0, 1, 0] = 0.25
    np.testing.assert_array_equal(X, want)
    np.testing.assert_array_equal(Z, g.Z)
    shown = texts(at)
    # the same link in a fresh session: the edited problem, the same numbers
    again = open_page("geometry.py", query={"geo_data": link})
    assert any("edited data" in i.value for i in again.info)
    assert texts(again) == shown
    assert again.query_params["geo_data"] in (link, [link])
    # typing the original value back takes the data out of the link
    at.session_state["geo_tok_geometry-1"] = {
        "edited_rows": {1: {"x₁": float(g.X[0, 1, 0])}},
        "added_rows": [],
        "deleted_rows": [],
    }
    at.run()
    assert_clean(at)
    assert "geo_data" not in at.query_params
    assert not any("edited data" in i.value for i in at.info)
    assert not any("Ignored link parameters" in w.value for w in at.warning)  # on purpose
    # switching the data drops edits of the other data, silently too
    again.segmented_control(key="geo_src").set_value("geometry-2").run()
    assert_clean(again)
    assert "geo_data" not in again.query_params
    assert not again.warning and not any("edited data" in i.value for i in again.info)


@pytest.mark.parametrize(
    "bad",
    [
        "geometry-1|2,3|1,2|1,1|0,1,1,0|1,0",
        "x|99,99|1|1|1|1",
        "geometry-1|2,3|" + ",".join(["nan"] * 12) + "|1,1|0,1,1,0|1,0",
        "garbage",
    ],
)
def test_a_bad_link_data_is_ignored_with_a_warning(bad):
    at = open_page("geometry.py", query={"geo_data": bad})
    warnings = [w.value for w in at.warning]
    assert sum("Ignored the link's edited data" in w for w in warnings) == 1
    assert not any("Ignored link parameters" in w for w in warnings)  # said once
    assert not at.info or not any("edited data" in i.value for i in at.info)
    assert "geo_data" not in at.query_params
