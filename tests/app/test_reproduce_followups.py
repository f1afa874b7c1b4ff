"""The Reproduce page's "Follow-up papers" section: a card per follow-up experiment with the
authors' settings, Run with progress, chart, our statistic next to the authors', downloads,
and hosted-mode pricing like the paper's cards."""

from __future__ import annotations

import pytest
from conftest import assert_clean, charts, open_page

import attsvm.experiments as experiments
from ui import hosted

# small settings per card (the authors' defaults take seconds each; the test only needs a run)
SMALL = {
    "ntp-global": {"instances": 2, "steps": 200},
    "ntp-local": {"instances": 2, "steps": 200},
    "lp-mirror-descent": {"runs": 1, "steps": 500},
    "adaptive-steps": {"runs": 1, "steps": 400},
    "joint-training": {"runs": 1, "steps": 100},
    "rank-staircase": {"runs": 1, "steps": 200},
    "weight-decay": {"runs": 1, "steps": 400, "segments": 20},
    "real-words": {"n": 8, "steps": 200, "subsets": 2, "subset_n": 4},
    "svm-hierarchy": {"runs": 1, "steps": 200, "n": 4, "T": 4, "d": 4},
    "pretrained-heads": {"sentences": 2, "layers": (0,), "heads": (2, 5), "n_random": 1},
}
# follow-ups whose defaults are priced over the hosted budget (every bundled sentence; 60
# (K, Q) runs of 20k steps, and 20 segments of them; 48 stacks and their heads' SVMs): the
# results store serves their defaults
OVER_HOSTED = {"real-words", "rank-staircase", "weight-decay", "svm-hierarchy", "pretrained-heads"}


def test_every_follow_up_has_a_card_under_its_own_heading():
    at = open_page("reproduce.py")
    assert any(h.value == "Follow-up papers" for h in at.header)
    keys = {b.key for b in at.button}
    assert {f"repro-{name}-run" for name in experiments.FOLLOWUPS} <= keys
    assert set(SMALL) == set(experiments.FOLLOWUPS)
    captions = "\n".join(c.value for c in at.caption)
    assert "0.98593" in captions and "0.99793" in captions  # the authors' NTP numbers
    # the fixtures folder is a path on the machine running attsvm: not a card setting
    assert not [w for w in at.text_input if w.key == "repro-ntp-global-fixtures"]


@pytest.mark.parametrize("name", sorted(SMALL))
def test_a_follow_up_card_runs_and_offers_its_files(name):
    at = open_page("reproduce.py")
    for field, value in SMALL[name].items():
        if isinstance(value, tuple):  # typed as a Python literal
            at.text_input(key=f"repro-{name}-{field}").set_value(repr(value))
        else:
            at.number_input(key=f"repro-{name}-{field}").set_value(value)
    at.button(key=f"repro-{name}-run").click().run()
    assert_clean(at)
    ours = [s.value for s in at.success if s.value.startswith("**Ours")]
    assert len(ours) == 1
    res = experiments.run(name, **SMALL[name])  # the same settings, headless
    assert hosted.escape_markdown(res.summary["text"]) in ours[0]
    assert len(charts(at)) == 1
    keys = {b.key for b in at.get("download_button")}
    assert {f"repro-{name}-dl-{k}" for k in ("csv", "json", "html")} <= keys


def test_follow_ups_are_priced_and_refused_over_budget_in_hosted_mode(monkeypatch):
    monkeypatch.setenv("ATTSVM_MODE", "hosted")
    at = open_page("reproduce.py")
    keys = {b.key for b in at.button}
    fit = set(experiments.FOLLOWUPS) - OVER_HOSTED
    assert {f"repro-{name}-run" for name in fit} <= keys  # defaults fit
    assert any("priced at" in c.value for c in at.caption)
    at.number_input(key="repro-ntp-global-instances").set_value(300).run()
    assert_clean(at)
    assert "repro-ntp-global-run" not in {b.key for b in at.button}
    assert any(
        "ntp-global with these settings asks for" in e.value and "`instances` ≤" in e.value
        for e in at.error
    )
