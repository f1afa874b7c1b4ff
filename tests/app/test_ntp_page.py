"""Next-token prediction page: graphs, Graph-SVM, live GD, edits that merge/split SCCs."""

from conftest import assert_clean, chart_specs, charts, open_page, texts

# the authors' instance 0 (its only cycle: {0, 5} in G^(2))
AUTHORS_0 = "1 2 5 4 : 1\n5 0 1 2 : 5\n4 5 3 1 : 5\n3 5 0 2 : 0\n3 1 0 4 : 1\n5 1 3 0 : 3"


def test_default_page_shows_graphs_svm_and_the_run():
    at = open_page("ntp.py", query={"ntp_steps": 400})
    t = texts(at)
    assert "Graph-SVM: `optimal`" in t and "KKT residual" in t
    assert "After 400 steps" in t and "corr(W, W^svm)" in t
    assert "(cycle)" in t  # the generator keeps a cycle
    assert len(charts(at)) == 5


def test_editing_a_sequence_merges_and_splits_sccs():
    at = open_page("ntp.py", query={"ntp_steps": 400})
    at.text_area(key="ntp_seqs").set_value(AUTHORS_0).run()
    assert_clean(at)
    assert "G^(2): {0, 5} (cycle)" in texts(at)
    # label 3 -> 5 in the last sequence: 5 beats 0 in G^(0)... and sequence 3 (ends in 2)
    # flipping its label 0 -> 3 breaks the cycle {0, 5} of G^(2)
    at.text_area(key="ntp_seqs").set_value(AUTHORS_0.replace("3 5 0 2 : 0", "3 5 0 2 : 3")).run()
    assert_clean(at)
    t = texts(at)
    assert "What changed" in t and "split {0, 5}" in t
    at.text_area(key="ntp_seqs").set_value(AUTHORS_0).run()
    assert "merged" in texts(at) and "into {0, 5}" in texts(at)


def test_infeasible_graph_svm_is_said_not_drawn():
    at = open_page("ntp.py", query={"ntp_steps": 200, "ntp_K": 3, "ntp_d": 1})
    at.text_area(key="ntp_seqs").set_value("1 2 0 : 1\n0 2 1 : 1").run()
    assert_clean(at)
    t = texts(at)
    assert "Graph-SVM is infeasible" in t and "linearly dependent" in t
    assert "corr(W, W^svm) **" not in t


def test_bad_sequences_are_explained():
    at = open_page("ntp.py", query={"ntp_steps": 200})
    for bad, word in [
        ("1 2 3 : 9", "`labels` must be ids"),
        ("1 1 3 : 1", "distinct"),
        ("1 2 3", "must read 'ids"),
        ("1 2 3 : 4", "a token of"),
    ]:
        at.text_area(key="ntp_seqs").set_value(bad).run()
        assert_clean(at)
        assert at.error and word in at.error[0].value, (bad, at.error[0].value if at.error else "")


def test_random_button_and_controls_change_the_output():
    at = open_page("ntp.py", query={"ntp_steps": 250})  # off the widget's grid of 200
    assert "After 250 steps" in texts(at)
    before = chart_specs(at)
    at.number_input(key="ntp_seed").set_value(3).run()
    at.button(key="ntp_draw").click().run()
    assert_clean(at)
    assert chart_specs(at) != before


def test_over_budget_is_refused(tiny_budget):
    at = open_page("ntp.py")
    assert at.error and "work units" in at.error[0].value


def test_hostile_link_parameters_are_ignored_or_explained():
    from test_bad_inputs import HOSTILE, no_raw_markup

    keys = ["ntp_K", "ntp_d", "ntp_seed", "ntp_steps", "ntp_lr", "ntp_shape"]
    at = open_page("ntp.py", query={k: HOSTILE[j] for j, k in enumerate(keys)})
    assert_clean(at)
    no_raw_markup(at)
    for bad in HOSTILE:
        at.text_area(key="ntp_seqs").set_value(bad).run()
        assert_clean(at)
        no_raw_markup(at)
        assert at.error


def test_link_restores_the_sequences_and_export_holds_the_run(monkeypatch):
    import streamlit

    from attsvm import export

    seen = {}
    real = streamlit.download_button

    def capture(label, data, *args, key=None, **kwargs):
        seen[key] = data
        return real(label, b"", *args, key=key, **kwargs)

    monkeypatch.setattr(streamlit, "download_button", capture)
    at = open_page("ntp.py", query={"ntp_steps": 200, "ntp_seqs": AUTHORS_0})
    assert "G^(2): {0, 5} (cycle)" in texts(at)
    files = export.read_bundle(seen["ntp_export"]())
    assert {
        "tables/curves.csv",
        "tables/sequences.csv",
        "charts/graphs.json",
        "charts/attention.html",
    } <= set(files)


def test_the_authors_settings_fit_the_hosted_budget(monkeypatch):
    monkeypatch.setenv("ATTSVM_MODE", "hosted")
    at = open_page("ntp.py")  # 4000 steps, lr 0.01, n × T = 6 × 4
    assert not at.error and "After 4,000 steps" in texts(at)


def test_fully_cyclic_data_is_all_soft_composition():
    """The authors' `manual_toy_case`: one SCC per graph, W^svm = 0; W^fin is the model."""
    toy = "\n".join(
        [
            "0 1 2 : 0",
            "0 1 2 : 1",
            "0 1 2 : 1",
            "0 1 2 : 2",
            "0 1 2 : 2",
            "0 1 2 : 2",
            "2 1 0 : 2",
            "2 1 0 : 1",
            "2 1 0 : 1",
            "2 1 0 : 0",
            "2 1 0 : 0",
            "2 1 0 : 0",
        ]
    )
    at = open_page("ntp.py", query={"ntp_steps": 400, "ntp_K": 3, "ntp_d": 4})
    at.text_area(key="ntp_seqs").set_value(toy).run()
    assert_clean(at)
    t = texts(at)
    assert "G^(2): {0, 1, 2} (cycle)" in t and "0 margin" in t
    assert "floor 1.0114" in t  # the label entropy, −Σ f log f
    assert "W^svm = 0" in t and "nan" not in t
