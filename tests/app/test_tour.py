"""The first minute: Overview draws the hero chart, and every tour step opens its page with
prepared settings on which the step's statement holds (the numbers behind the sentence)."""

from __future__ import annotations

import re

import pytest
from conftest import assert_clean, charts, open_page, table, texts

from ui import tour


def test_overview_draws_the_hero_and_links_the_tour():
    at = open_page(None)
    assert len(charts(at)) == 1
    assert "step 2,000" in charts(at)[0].proto.spec
    cap = texts(at)
    assert "Frobenius-norm SVM W^mm (corr 0.999" in cap and "W^mm_* (corr 0.999" in cap
    at.button(key="hero_replay").click().run()  # replay draws the same final frame
    assert_clean(at)
    assert len(charts(at)) == 1


def test_the_tour_page_lists_every_step():
    at = open_page("tour.py")
    t = texts(at)
    for k, s in enumerate(tour.STEPS):
        assert f"{k + 1}. {s.title}" in t


def _step(k: int):
    s = tour.STEPS[k]
    at = open_page(s.page, tour.link_query(k))
    assert_clean(at)
    banner = texts(at)
    assert f"Tour {k + 1}/{len(tour.STEPS)}" in banner and s.title in banner
    return at


def _metrics(at):
    return {m.label: m.value for m in at.metric}


def test_step_1_gd_selects_the_optimal_tokens():
    t = texts(_step(0))
    m = re.search(r"GD selects α = `([\d·]+)`.*?opt = `([\d·]+)`", t)
    assert m and m.group(1) == m.group(2), t[:300]


def test_step_2_each_parameterization_its_own_norm():
    m = _metrics(_step(1))
    w_fro, w_nuc = map(float, m["W-GD: corr with W^mm / W^mm_*"].split(" / "))
    kq_fro, kq_nuc = map(float, m["(K,Q)-GD: corr with W^mm / W^mm_*"].split(" / "))
    assert w_fro > 0.99 and kq_nuc > 0.99 and w_fro > w_nuc and kq_nuc > kq_fro, m


def test_step_3_a_local_optimum_exists():
    at = _step(2)
    c = {k: int(v) for k, v in _metrics(at).items()}
    assert c["global (α = opt)"] == 1 and c["locally optimal"] >= 1
    assert len(charts(at)) == 2


def test_step_4_larger_d_feasible_and_more_global():
    at = _step(3)
    f = table(at, "d").set_index("d")
    glob = f["1 · GD reached α = opt (global)"]
    feas = f["3 · Att-SVM for α = opt feasible"]
    assert (feas.loc[[4, 8, 12]] == 1.0).all() and feas.loc[2] < 1.0
    assert glob.loc[12] > glob.loc[2]


def test_step_5_nuclear_svm_has_lower_rank():
    ranks = table(_step(4), "matrix").set_index("matrix")["rank"]
    assert int(ranks["W^mm_*,α (nuclear)"]) < int(ranks["W^mm_α (Frobenius)"])
    assert int(ranks["K(k)Q(k)ᵀ after GD on K, Q"]) < int(ranks["W(k) after GD on W"])


def test_step_6_generalized_svm_fits_best_and_keeps_several_tokens():
    at = _step(5)
    m = {k.replace("1 − corr with ", ""): float(v) for k, v in _metrics(at).items()}
    assert m["W^fin + R_k·W^dir (generalized SVM)"] < m["W^dir alone"] < m["one-token SVM W^mm_α"]
    assert table(at, "|O_i|")["|O_i|"].max() >= 2


def test_step_7_every_causal_query_selects_optimally():
    assert _metrics(_step(6))["queries whose selection is optimal"] == "10 / 10"


@pytest.mark.parametrize("k", range(len(tour.STEPS)))
def test_every_step_has_next_and_previous_links(k):
    at = _step(k)
    labels = [p.label for p in at.get("page_link")]
    assert ("Previous step" in labels) == (k > 0)
    assert ("Next step" in labels) == (k + 1 < len(tour.STEPS))
