"""The `svm-hierarchy` experiment: registered like the others, its frames consistent with
`attsvm.audit_stack` on the same runs."""

import numpy as np
import pytest

import attsvm
from attsvm import experiments
from attsvm.experiments import budget

pytest.importorskip("attsvm.audit")
TINY = dict(n=4, T=4, d=4, runs=2, steps=300, heads=(1, 2), values=("shared",))


@pytest.fixture(scope="module")
def result():
    return experiments.run("svm-hierarchy", **TINY)


def test_registered_as_a_follow_up_with_a_price_and_a_chart(result):
    from attsvm_charts.experiments import chart

    assert "svm-hierarchy" in experiments.FOLLOWUPS
    assert "svm-hierarchy" not in experiments.EXPERIMENTS
    assert experiments.price("svm-hierarchy").seconds > 0
    assert (
        budget.price("svm-hierarchy", experiments.settings("svm-hierarchy", **TINY)).sizes["solves"]
        == 2 * (1 + 2) * 2
    )
    chart(result).to_dict()
    assert "Found:" in result.summary["text"]
    with pytest.raises(ValueError, match="`heads`"):
        experiments.settings("svm-hierarchy", heads=(5,))


def test_frames_match_an_audit_of_the_same_run(result):
    heads, layers = result.frames["heads"], result.frames["layers"]
    assert len(heads) == 2 * 2 * (1 + 2)  # runs × layers × heads, summed
    prob = attsvm.random_problem(4, 4, 4, 1, attention="self", query_index=3)
    init = attsvm.stack.stack_init(prob, 2, 2, seed=0, index=1)  # run 1 of the batch
    run = attsvm.train_stack(
        prob, layers=2, heads=2, steps=300, lr=0.1, record_every=300, init=init
    )
    audit = attsvm.stack.audit_stack(prob, run)
    mine = heads[(heads.heads == 2) & (heads.run == 1)].sort_values(["layer", "head"])
    np.testing.assert_allclose(mine.cos, audit.cos.ravel(), rtol=1e-6)
    np.testing.assert_allclose(mine.agree.iloc[[0, 2]], audit.agree[:, 0, 1], rtol=1e-12)
    for (setting, layer), t in heads.groupby(["setting", "layer"]):
        row = layers[(layers.setting == setting) & (layers.layer == layer)].iloc[0]
        assert row.reach == pytest.approx(np.mean(t.cos >= 0.99))
