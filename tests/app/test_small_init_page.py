"""The "Rank from small init" page: it draws the staircase, the loss, the gap, the ranks
next to the nuclear-norm SVM's and the verdict; link state restores its controls; the
weight-decay gap falls; each claim carries its mark."""

from __future__ import annotations

from conftest import assert_clean, charts, open_page, texts

# the sidebar's default problem (n=6, T=8, d=10); 1000 steps keep the test short
QUERY = {"stair_steps": 1000, "stair_alpha": 0.0001}


def test_small_init_page_draws_every_part_and_stays_rank_one():
    at = open_page("staircase.py", QUERY)
    assert_clean(at)
    assert len(charts(at)) == 4  # σ(ΔW) vs step and rescaled, loss, gap
    body = texts(at)
    assert "proved" in body and "observed here" in body and "2306.07042" in body
    assert "Selection reached" in body and "Take-off steps" in body
    ranks = dict(at.dataframe[0].value.values.tolist())
    assert ranks["numerical rank of ΔW (σ > 0.01·σ₁)"] == "1"  # α = 1e-4: rank 1 at 1000
    assert ranks["rank of W^mm_*,α (nuclear SVM, selection reached)"] != ""
    # the link restored the controls
    assert at.select_slider(key="stair_alpha").value == 0.0001
    assert at.selectbox(key="stair_steps").value == 1000
    assert any(b.label == "Export (zip)" for b in at.get("download_button"))


def test_weight_decay_balances_the_factors_on_the_page():
    at = open_page("staircase.py", {**QUERY, "stair_alpha": 1, "stair_lambda": 0.03})
    assert_clean(at)
    body = texts(at)
    gap = float(body.split("Relative gap at the end: ")[1].split(".\n")[0].rstrip("."))
    assert gap < 1e-6
    assert "t / log(1/α) needs α < 1." in body


def test_hostile_link_values_fall_back_to_defaults_in_hosted_mode(monkeypatch):
    monkeypatch.setenv("ATTSVM_MODE", "hosted")
    at = open_page(
        "staircase.py",
        {
            "stair_steps": "1e400",
            "stair_alpha": "nan",
            "stair_lr": "-3",
            "stair_kind": "<b>x</b>",
            "stair_lambda": "99",
        },
    )
    assert_clean(at)
    assert at.selectbox(key="stair_kind").value == "gaussian"
    assert at.number_input(key="stair_lr").value == 0.5
    assert at.select_slider(key="stair_lambda").value == 0.0
    assert len(charts(at)) == 4 and "Selection reached" in texts(at)
