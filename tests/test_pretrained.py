"""attsvm.pretrained and attsvm.audit against independent references: a tiny random BERT
written as safetensors here and run by a plain per-token loop, explicit constraint matrices,
and cvxpy solves of the same Att-SVMs."""

import json
import math

import cvxpy as cp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from attsvm import audit, pretrained

WORDS = ["the", "cat", "sat", "on", "mat", "a", "dog", "ran", "to", "park", "big", "red"]
TINY = dict(layers=2, heads=2, d=12, d_ff=20, positions=16)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A random BERT (2 layers, 2 heads, d 12) with a WordPiece tokenizer over WORDS."""
    from safetensors.numpy import save_file
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

    path = tmp_path_factory.mktemp("tiny")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"] + WORDS
    ids = {w: i for i, w in enumerate(vocab)}
    tok = Tokenizer(models.WordPiece(ids, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)]
    )
    tok.enable_padding(length=16)  # as the real file: load() must turn it off
    tok.save(str(path / "tokenizer.json"))
    c = TINY
    (path / "config.json").write_text(
        json.dumps(
            dict(
                num_hidden_layers=c["layers"],
                num_attention_heads=c["heads"],
                hidden_size=c["d"],
                intermediate_size=c["d_ff"],
                max_position_embeddings=c["positions"],
                vocab_size=len(vocab),
                layer_norm_eps=1e-12,
                hidden_act="gelu",
            )
        )
    )
    rng = np.random.default_rng(0)
    f = lambda *s: (rng.standard_normal(s) * 0.5).astype(np.float32)
    d, F = c["d"], c["d_ff"]
    w = {
        "embeddings.word_embeddings.weight": f(len(vocab), d),
        "embeddings.position_embeddings.weight": f(c["positions"], d),
        "embeddings.token_type_embeddings.weight": f(2, d),
        "embeddings.LayerNorm.weight": 1 + f(d),
        "embeddings.LayerNorm.bias": f(d),
    }
    for l in range(c["layers"]):
        p = f"encoder.layer.{l}."
        for n in ("query", "key", "value"):
            w[p + f"attention.self.{n}.weight"] = f(d, d)
            w[p + f"attention.self.{n}.bias"] = f(d)
        w[p + "attention.output.dense.weight"], w[p + "attention.output.dense.bias"] = f(d, d), f(d)
        w[p + "attention.output.LayerNorm.weight"] = 1 + f(d)
        w[p + "attention.output.LayerNorm.bias"] = f(d)
        w[p + "intermediate.dense.weight"], w[p + "intermediate.dense.bias"] = f(F, d), f(F)
        w[p + "output.dense.weight"], w[p + "output.dense.bias"] = f(d, F), f(d)
        w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"] = 1 + f(d), f(d)
    save_file(w, str(path / "model.safetensors"))
    return path, {k: v.astype(np.float64) for k, v in w.items()}, ids


def _loop_forward(w, ids, c):
    """The BERT forward pass token by token with Python loops (no matrix products over
    tokens): per layer, the inputs and the attention weights [head][t][s], and the raw
    scores q_t·k_s/√d_head."""
    d, H = c["d"], c["heads"]
    dh = d // H

    def ln(v, g, b):
        mu = sum(v) / len(v)
        var = sum((x - mu) ** 2 for x in v) / len(v)
        return np.array(
            [(x - mu) / math.sqrt(var + 1e-12) * gg + bb for x, gg, bb in zip(v, g, b, strict=True)]
        )

    def lin(W, b, v):
        return np.array(
            [sum(W[o, i] * v[i] for i in range(len(v))) + b[o] for o in range(W.shape[0])]
        )

    T = len(ids)
    x = [
        ln(
            w["embeddings.word_embeddings.weight"][ids[t]]
            + w["embeddings.position_embeddings.weight"][t]
            + w["embeddings.token_type_embeddings.weight"][0],
            w["embeddings.LayerNorm.weight"],
            w["embeddings.LayerNorm.bias"],
        )
        for t in range(T)
    ]
    inputs, attention, scores = [], [], []
    for l in range(c["layers"]):
        p = f"encoder.layer.{l}."
        inputs.append(np.array(x))
        q, k, v = (
            [
                lin(w[p + f"attention.self.{n}.weight"], w[p + f"attention.self.{n}.bias"], x[t])
                for t in range(T)
            ]
            for n in ("query", "key", "value")
        )
        A = np.zeros((H, T, T))
        S = np.zeros((H, T, T))
        ctx = [np.zeros(d) for _ in range(T)]
        for h in range(H):
            hs = range(h * dh, (h + 1) * dh)
            for t in range(T):
                s_row = [sum(q[t][j] * k[s][j] for j in hs) / math.sqrt(dh) for s in range(T)]
                mx = max(s_row)
                e = [math.exp(z - mx) for z in s_row]
                for s in range(T):
                    A[h, t, s] = e[s] / sum(e)
                    S[h, t, s] = s_row[s]
                for j in hs:
                    ctx[t][j] = sum(A[h, t, s] * v[s][j] for s in range(T))
        attention.append(A)
        scores.append(S)
        y = [
            ln(
                x[t]
                + lin(
                    w[p + "attention.output.dense.weight"],
                    w[p + "attention.output.dense.bias"],
                    ctx[t],
                ),
                w[p + "attention.output.LayerNorm.weight"],
                w[p + "attention.output.LayerNorm.bias"],
            )
            for t in range(T)
        ]
        new = []
        for t in range(T):
            u = lin(w[p + "intermediate.dense.weight"], w[p + "intermediate.dense.bias"], y[t])
            u = np.array([0.5 * z * (1 + math.erf(z / math.sqrt(2))) for z in u])
            o = lin(w[p + "output.dense.weight"], w[p + "output.dense.bias"], u)
            new.append(
                ln(y[t] + o, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"])
            )
        x = new
    return inputs, attention, scores


SENTS = ["the cat sat on the mat", "a big red dog ran to the park", "the dog sat"]


def test_forward_matches_a_per_token_loop(tiny):
    path, w, ids = tiny
    model = pretrained.load(path)
    enc = model.encode(SENTS)
    for i, s in enumerate(SENTS):
        want = [ids["[CLS]"]] + [ids[t] for t in s.split()] + [ids["[SEP]"]]
        assert enc.ids[i].tolist() == want  # no [PAD]: padding was turned off
        inputs, attention, _ = _loop_forward(w, want, TINY)
        for l in range(TINY["layers"]):
            x = enc.inputs[l][i]
            assert np.linalg.norm(x - inputs[l]) <= 1e-6 * np.linalg.norm(inputs[l])
            np.testing.assert_allclose(enc.attention[l][i], attention[l], atol=1e-6, rtol=0)


def test_head_matrix_reproduces_the_attention_logits(tiny):
    path, w, ids = tiny
    model = pretrained.load(path)
    want = [ids["[CLS]"]] + [ids[t] for t in SENTS[1].split()] + [ids["[SEP]"]]
    inputs, _, scores = _loop_forward(w, want, TINY)
    for l in range(TINY["layers"]):
        x = inputs[l]
        for h in range(TINY["heads"]):
            Wh = model.head_matrix(l, h)
            assert Wh.shape == (TINY["d"], TINY["d"] + 1)
            mine = (x @ Wh @ pretrained.queries_of(x).T).T  # [t, s]
            diff = scores[l][h] - mine  # the key bias term: constant along each row
            np.testing.assert_allclose(diff - diff[:, :1], 0, atol=1e-9)
            assert np.ptp(diff) > 1e-3  # and not zero: the key bias is really dropped


def test_too_long_and_empty_sentences_are_refused(tiny):
    model = pretrained.load(tiny[0])
    model_long = " ".join(["cat"] * 20)  # 22 tokens > 16 positions
    with pytest.raises(ValueError, match="tokens"):
        model.encode([model_long])
    with pytest.raises(ValueError, match="empty"):
        model.encode(["the cat", "  "])


def _ref_audit(keys, queries, W, attention, tau):
    """Plain loops: selections, explicit A_j, cvxpy primal W^mm, ‖P_S W‖ by lstsq."""
    rows, n_q, kept = [], 0, 0
    for K, Q, A in zip(keys, queries, attention, strict=True):
        for t in range(len(K)):
            n_q += 1
            a = int(np.argmax(A[t]))
            if A[t, a] < tau:
                continue
            kept += 1
            rows += [np.outer(K[a] - K[s], Q[t]).ravel() for s in range(len(K)) if s != a]
    Amat = np.array(rows)
    # the primal min ‖W‖_F² s.t. ⟨A_j, W⟩ ≥ 1 in an orthonormal basis of span{A_j} (the
    # minimiser lies there: any part outside changes no margin and adds norm)
    _, sv, Vt = np.linalg.svd(Amat, full_matrices=False)
    B = Vt[sv > 1e-10 * sv[0]]
    c = cp.Variable(B.shape[0])
    cp.Problem(cp.Minimize(cp.sum_squares(c)), [(Amat @ B.T) @ c >= 1]).solve(solver="CLARABEL")
    # polish on Clarabel's active set (objective error ε moves W by √ε): the least-norm W
    # with ⟨A_j, W⟩ = 1 there, checked optimal by its KKT conditions (λ ≥ 0, feasible)
    act = Amat @ (B.T @ c.value) <= 1 + 1e-5
    for _ in range(50):
        lam = np.linalg.lstsq(Amat[act] @ Amat[act].T, np.ones(act.sum()), rcond=1e-12)[0]
        w = Amat[act].T @ lam
        low, neg = Amat @ w < 1 - 1e-10, np.flatnonzero(act)[lam < -1e-12]
        if not low.any() and neg.size == 0:
            break
        act = act | low
        act[neg[:1]] = False
    assert lam.min() >= -1e-12 and (Amat @ w).min() >= 1 - 1e-10
    Wmm = w.reshape(W.shape)
    coef = np.linalg.lstsq(Amat.T, W.ravel(), rcond=1e-10)[0]
    PW = Amat.T @ coef
    inner = np.sum(W * Wmm)
    return dict(
        coverage=kept / n_q,
        Wmm=Wmm,
        cos=inner / np.linalg.norm(W) / np.linalg.norm(Wmm),
        cos_span=inner / np.linalg.norm(PW) / np.linalg.norm(Wmm),
    )


def _check(res, ref):
    assert res.coverage == ref["coverage"]
    assert res.svm.feasible
    rel = np.linalg.norm(res.svm.W - ref["Wmm"]) / np.linalg.norm(ref["Wmm"])
    assert rel <= 1e-5
    assert res.cos == pytest.approx(ref["cos"], abs=1e-4)
    assert res.cos_span == pytest.approx(ref["cos_span"], abs=1e-4)
    assert res.svm.gap is None or res.svm.gap <= 1e-6


def test_audit_matches_cvxpy_on_the_tiny_model(tiny):
    model = pretrained.load(tiny[0])
    enc = model.encode(SENTS)
    for l, h in [(0, 0), (1, 1)]:
        keys = enc.inputs[l]
        qs = [pretrained.queries_of(x) for x in keys]
        att = [A[h] for A in enc.attention[l]]
        tau = 0.3
        res = audit.audit_attention(keys, qs, model.head_matrix(l, h), att, tau=tau)
        _check(res, _ref_audit(keys, qs, model.head_matrix(l, h), att, tau))


def test_span_norm_handles_duplicates_causal_masks_and_query_rows():
    rng = np.random.default_rng(1)
    X = [rng.standard_normal((5, 4)) for _ in range(3)]
    X.append(X[0].copy())  # a repeated sequence: repeated constraints
    Q = [np.concatenate([x, np.ones((5, 1))], 1) for x in X]
    W = rng.standard_normal((4, 5))
    for causal, rows in [(False, None), (True, None), (False, [np.array([0, 2])] * 4)]:
        alpha = [np.where(rng.random(5) < 0.8, rng.integers(0, 5, 5), -1) for _ in X]
        if causal:
            alpha = [np.where(a >= 0, np.minimum(a, np.arange(5)), -1) for a in alpha]
            alpha = [np.where(np.arange(5) == 0, -1, a) for a in alpha]
        if rows is not None:
            alpha = [
                np.where(np.isin(np.arange(5), r), a, -1) for a, r in zip(alpha, rows, strict=True)
            ]
        alpha[3] = alpha[0]
        c = audit.assemble(X, Q, alpha, causal=causal)
        A = np.array([np.outer(c.D[j], c.Z[c.query[j]]).ravel() for j in range(c.m)])
        assert len({r.tobytes() for r in A}) == c.m  # duplicates removed
        PW = A.T @ np.linalg.lstsq(A.T, W.ravel(), rcond=1e-10)[0]
        span = audit.Span(c, by_sequence=not causal)
        assert span.norm(W) == pytest.approx(np.linalg.norm(PW), rel=1e-8)
        np.testing.assert_allclose(span.project(W).ravel(), PW, atol=1e-8)
        np.testing.assert_allclose(c.margins(W), A @ W.ravel(), atol=1e-10)


def test_the_span_by_conjugate_gradients_agrees_or_says_it_does_not_know(monkeypatch):
    """Past DENSE_MAX the projection runs by CG: converged, the dense value; stopped short of
    CG_RTOL, NaN (never an unconverged number)."""
    rng = np.random.default_rng(4)
    X = [rng.standard_normal((6, 8)) for _ in range(4)]
    Q = [np.concatenate([x, np.ones((6, 1))], 1) for x in X]
    alpha = [rng.integers(0, 6, 6) for _ in X]
    c = audit.assemble(X, Q, alpha)
    W = rng.standard_normal((8, 9))
    Ws = [W, rng.standard_normal((8, 9)), np.zeros((8, 9))]
    dense = audit.Span(c, by_sequence=True).norms(Ws)  # one solve for all three
    one_by_one = [audit.Span(c, by_sequence=True).norm(B) for B in Ws]
    np.testing.assert_allclose(dense, one_by_one, rtol=1e-12)
    assert dense[2] == 0
    monkeypatch.setattr(audit, "DENSE_MAX", 0)
    np.testing.assert_allclose(audit.Span(c, by_sequence=True).norms(Ws), dense, rtol=1e-8)
    monkeypatch.setattr(audit, "CG_MAXITER", 2)
    assert np.isnan(audit.Span(c, by_sequence=True).norm(W))


# -- the real model ---------------------------------------------------------------------------
needs_model = pytest.mark.skipif(
    __import__("importlib").util.find_spec(pretrained.PACKAGE) is None,
    reason="the model package is not installed (requirements-models.txt)",
)


@needs_model
def test_real_model_embeds_paraphrases_closer_than_unrelated_sentences():
    model = pretrained.load()
    assert model.config.layers == 6 and model.config.heads == 12 and model.config.d == 384
    E = model.encode(
        [
            "A man is playing a guitar.",
            "Someone plays the guitar.",
            "The stock market fell sharply today.",
            "Share prices dropped steeply this morning.",
        ]
    ).embeddings()
    S = E @ E.T
    assert S[0, 1] > 0.6 and S[2, 3] > 0.6
    assert max(S[0, 2], S[0, 3], S[1, 2], S[1, 3]) < 0.3
    assert pretrained.corpus()[0] == "A wise son maketh a glad father."
    assert len(pretrained.corpus()) == 300


@needs_model
def test_audit_head_matches_cvxpy_on_held_out_sentences():
    model = pretrained.load()
    sents = ["The cat sat down.", "Rain fell all night."]  # not in the corpus
    res = pretrained.audit_head(
        model, sents, layer=0, head=2, baselines=True, n_random=1, n_shuffled=1
    )
    enc = model.encode(sents, layers=1)
    keys = enc.inputs[0]
    ref = _ref_audit(
        keys,
        [pretrained.queries_of(x) for x in keys],
        model.head_matrix(0, 2),
        [A[2] for A in enc.attention[0]],
        0.5,
    )
    _check(res, ref)
    kinds = [b.kind for b in res.baselines]
    assert kinds.count("other") == 11 and "random" in kinds and "shuffled" in kinds
    assert res.margins_svm[0.0] == pytest.approx(1.0, abs=1e-6)


@needs_model
def test_audit_cli_writes_the_table(tmp_path, capsys):
    from attsvm.__main__ import main

    f = tmp_path / "s.txt"
    f.write_text("The cat sat down.\n\nRain fell all night.\n")
    assert (
        main(
            [
                "audit",
                "--layer",
                "0",
                "--head",
                "2",
                "--file",
                str(f),
                "--no-baselines",
                "--quiet",
                "--out",
                str(tmp_path / "out"),
            ]
        )
        == 0
    )
    import pandas as pd

    df = pd.read_csv(tmp_path / "out" / "heads.csv")
    assert list(df.columns) == list(pretrained.TABLE_COLUMNS)
    assert df[["layer", "head"]].values.tolist() == [[0, 2]] and df.coverage[0] == 1.0
    assert "L0H2: coverage 1.00" in capsys.readouterr().out
    assert main(["audit", "--layer", "9", "--quiet", "--out", str(tmp_path / "o2")]) == 2


def test_charts_draw_the_grid_the_map_and_the_margins():
    import pandas as pd

    from attsvm_charts import pretrained as charts

    rows = [
        dict(
            zip(
                pretrained.TABLE_COLUMNS,
                [
                    l,
                    h,
                    0.5,
                    10,
                    0.1,
                    0.2 if h else np.nan,
                    0.5,
                    -0.1,
                    0.1,
                    0.0,
                    0.1,
                    0.0,
                    5,
                    1e-9,
                    1.0,
                ],
                strict=True,
            )
        )
        for l in range(6)
        for h in range(12)
    ]
    spec = charts.heads_grid(pd.DataFrame(rows)).to_dict()
    values = next(iter(spec["datasets"].values()))
    assert len(values) == 72 and values[0]["label"] == "" and values[1]["label"] == "0.20"
    A = np.full((3, 3), 1 / 3)
    spec = charts.attention_map(["[CLS]", "<b>x</b>", "[SEP]"], A, np.array([-1, 0, 1]))
    data = [v for d in spec.to_dict()["datasets"].values() for v in d]
    assert sum(v["selected"] for v in data if "selected" in v) >= 2
    assert charts.margins_chart(np.ones(4), np.ones(4)).to_dict()["mark"]["type"] == "bar"


@needs_model
def test_heads_audited_in_a_helper_process_give_the_same_rows():
    """`audit_table` through `ordered_map` with one helper process (spawned: its own model
    and encoding) against the plain loop here: every column but the timing, bit for bit."""
    from attsvm.experiments import core

    model, sents = pretrained.load(), pretrained.corpus(2)
    grid = [(0, 2), (0, 5), (1, 3), (2, 0)]
    here = pretrained.audit_table(model, sents, heads=grid, n_random=1)
    core.use_helper_processes(1)
    try:
        there = pretrained.audit_table(
            model, sents, heads=grid, n_random=1, map_heads=core.ordered_map
        )
    finally:
        core.stop_helper_processes()
        core.use_helper_processes(0)
    assert here.drop(columns="seconds").equals(there.drop(columns="seconds"))


@needs_model
def test_the_experiment_record_is_audit_head_row_by_row():
    """`pretrained-heads` on 2 sentences and two heads: each row is `audit_head` on the same
    sentences and seeds, the summary counts a plain loop's heads above every baseline, and
    the price counts Σ T(T − 1) constraints per head from the tokenizer."""
    from attsvm import experiments
    from attsvm.experiments import pretrained_heads

    s = experiments.settings(
        "pretrained-heads", sentences=2, layers=(0,), heads=(2, 5), n_random=1, n_shuffled=1, seed=3
    )
    res = experiments.run("pretrained-heads", s)
    df = res.frames["heads"]
    model = pretrained.load()
    sents = pretrained.corpus(2)
    beat = 0
    for row in df.itertuples():
        r = pretrained.audit_head(
            model, sents, layer=row.layer, head=row.head, n_random=1, n_shuffled=1, seed=3
        )
        assert row.cos_span == pytest.approx(r.cos_span, abs=1e-12)
        assert row.n_constraints == r.n_constraints and row.coverage == r.coverage
        beat += r.cos_span > max(b.cos_span for b in r.baselines if np.isfinite(b.cos_span))
    assert res.summary["beat_every_baseline"] == beat
    T = [len(t) for t in model.tokenize(sents)[0]]
    items, _, sizes = pretrained_heads.price(s)
    M = sum(t * (t - 1) for t in T)
    ph = pretrained_heads
    per_head = ph.HEAD_WORK + ph.SOLVE_WORK * M**2 * (1 + 1) / 2 + ph.SPAN_WORK * M**3
    assert items[1][1] == pytest.approx(2 * per_head)
    assert sizes == dict(sentences=2, T=max(T), solves=4)
    assert max(df.n_constraints) <= M


@given(st.lists(st.integers(0, 50), max_size=30))
def test_both_ends_puts_the_costliest_items_at_both_ends(costs):
    """A permutation whose halves, read from each end toward the middle, never grow: the
    two processes of `ordered_map` each start with one of the two costliest items."""
    order = pretrained.both_ends(costs)
    assert sorted(order) == list(range(len(costs)))
    front = [costs[k] for k in order[: (len(costs) + 1) // 2]]
    back = [costs[k] for k in order[(len(costs) + 1) // 2 :]][::-1]
    assert front == sorted(front, reverse=True) and back == sorted(back, reverse=True)
    if len(costs) >= 2:
        assert sorted([front[0], back[0]]) == sorted(costs)[-2:]


def test_audit_table_hands_the_largest_heads_to_both_ends_and_keeps_its_row_order(tiny):
    """With `map_heads`, the heads reach it costliest first at both ends (constraints before
    deduplication, from the selections), and the rows come back in the heads' order."""
    model = pretrained.load(tiny[0])
    enc = model.encode(SENTS)
    grid = [(l, h) for l in range(2) for h in range(2)]
    seen = []

    def backwards(fn, items, progress=None):
        seen.extend((it[3], it[4]) for it in items)
        return [fn(*it) for it in items[::-1]][::-1]

    mapped = pretrained.audit_table(model, SENTS, heads=grid, tau=0.3, map_heads=backwards)
    plain = pretrained.audit_table(model, SENTS, heads=grid, tau=0.3)
    assert mapped.drop(columns="seconds").equals(plain.drop(columns="seconds"))
    size = {}
    for l, h in grid:
        alpha, _ = audit.select([A[h] for A in enc.attention[l]], tau=0.3)
        size[l, h] = sum(int((a >= 0).sum()) * (a.size - 1) for a in alpha)
    top2 = sorted(size.values())[-2:]
    assert sorted([size[seen[0]], size[seen[-1]]]) == top2
    assert seen != grid  # reordered, so the row order above is a real check
