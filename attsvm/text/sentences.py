"""Sentences as attention problems: the tokens of sentence i are the unit-normalized GloVe
vectors of its words, in order (docs/theory.md §1 notation; arXiv 2308.16898 §2):

    x_it = e_{w_it} / ‖e_{w_it}‖,   s_i = softmax(X_i W z_i),   f_i = vᵀ X_iᵀ s_i,

with the linear head v fitted on a labelled word lexicon (`fit_head`), so the token score
γ_it = Y_i vᵀ x_it is large for the word whose lexicon polarity agrees with the label: the
optimal token of a sentence is its most label-bearing word.

Tokenization (`tokenize`): Unicode NFKC, lowercase, curly apostrophes made straight; a word
is a run of letters or digits, with inner apostrophes or hyphens kept ("well-made");
everything else (punctuation, symbols, HTML or markdown marks) separates words and is
dropped. A word missing from the GloVe vocabulary is left out of the tokens and reported in
`TextProblem.unknown`, never replaced by a guess. GloVe 6B splits contractions ("do",
"n't"), so "don't" is unknown: write "do not".

Queries: "mean" (cross-attention, z_i the normalized mean of the sentence's tokens),
"first" (self-attention on the first word, z_i = x_i0), or "word:<w>" (cross-attention with
the one query z = x_w for every sentence, a learned [CLS]-like query).

Dimension: `d` < 50 projects every vector onto the top-d right singular vectors of the
sentences' distinct words (uncentered PCA, so d = 50 is a rotation of the raw vectors and
changes no margin) and normalizes it again; the head is fitted in that space.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from .. import limits as _limits
from ..problems import MAX_N, MAX_T, Problem, check_int
from . import vectors

DATA = Path(__file__).parent / "data"
WORD = re.compile(r"[^\W_]+(?:['-][^\W_]+)*")
QUERIES = ("mean", "first")  # or "word:<w>"
LEXICONS = ("sentiment", "topic")
RIDGE = 0.01  # λ of the lexicon head's ridge regression
TASKS = {
    "polar": (
        "One polar word",
        "sentiment",
        "Each sentence has one sentiment word; the label is its polarity.",
    ),
    "negation": (
        "Negation",
        "sentiment",
        "“not good”: the label is the opposite of the negated word's polarity; the "
        "word that decides it is “not”.",
    ),
    "competing": (
        "Two competing polar words",
        "sentiment",
        "Two sentiment words of opposite polarity; the main clause's word decides.",
    ),
    "topic": (
        "Topic words",
        "topic",
        "Sports (+1) against food (−1): one topic word per sentence.",
    ),
}


def _err(name: str, rule: str, value) -> ValueError:
    text = repr(value)
    if len(text) > 80:
        text = text[:77] + "..."
    return ValueError(f"`{name}` must be {rule}; got {text}")


def tokenize(sentence: str) -> list[str]:
    """The words of `sentence` (module doc): NFKC, lowercase, letters/digits with inner ' or -."""
    text = unicodedata.normalize("NFKC", sentence).lower().replace("’", "'")
    return WORD.findall(text)


def check_sentences(sentences, *, limits=None) -> tuple[str, ...]:
    """Validate raw sentences before any work: a non-empty list of strings, within the
    mode's text caps (`attsvm.limits.check_text`), free of control characters."""
    if isinstance(sentences, str) or not isinstance(sentences, (list, tuple)):
        raise _err("sentences", "a non-empty list of strings", type(sentences).__name__)
    if not sentences:
        raise _err("sentences", "a non-empty list of strings", [])
    if not all(isinstance(s, str) for s in sentences):
        bad = next(s for s in sentences if not isinstance(s, str))
        raise _err("sentences", "a list of strings", type(bad).__name__)
    L = limits or _limits.current()
    _limits.check_text(
        chars=sum(map(len, sentences)), words=sum(len(s.split()) for s in sentences), limits=L
    )
    _limits.check_size(n=len(sentences), T=1, d=1, limits=L)
    check_int("len(sentences)", len(sentences), 1, MAX_N)
    for i, s in enumerate(sentences):
        bad = next((c for c in s if unicodedata.category(c) in ("Cc", "Cf")), None)
        if bad is not None:
            raise ValueError(
                f"`sentences[{i}]` must be free of control characters; got "
                f"U+{ord(bad):04X} in sentence {i + 1}"
            )
    return tuple(sentences)


def check_labels(labels, n: int) -> np.ndarray:
    """(n,) float labels, each +1 or −1."""
    try:
        y = np.array(labels, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise _err("labels", "a list of +1/−1 labels", type(labels).__name__) from exc
    if y.ndim != 1 or len(y) != n:
        raise _err("labels", f"one label per sentence ({n})", f"{y.size} labels")
    if not np.all(np.abs(y) == 1.0):
        raise _err("labels", "+1 or -1", sorted({float(a) for a in y if abs(a) != 1.0})[:5])
    return y


@dataclass(frozen=True, eq=False)
class Encoded:
    """Sentences looked up in GloVe: per sentence, its known words and rows (in order) and
    its unknown words."""

    words: tuple
    rows: tuple
    unknown: tuple


def encode(sentences, *, limits=None) -> Encoded:
    """Tokenize and look up every sentence (ValueError for one with no known word)."""
    sentences = check_sentences(sentences, limits=limits)
    L = limits or _limits.current()
    toks = [tokenize(s) for s in sentences]
    flat = [w for t in toks for w in t]
    ids = vectors.rows(flat)
    words, rows, unknown, at = [], [], [], 0
    for i, t in enumerate(toks):
        r = ids[at : at + len(t)]
        at += len(t)
        known = r >= 0
        if not np.any(known):
            raise _err(
                f"sentences[{i}]",
                f"a sentence with at least one word of the GloVe vocabulary (sentence {i + 1})",
                sentences[i],
            )
        words.append(tuple(w for w, k in zip(t, known, strict=True) if k))
        rows.append(r[known])
        unknown.append(tuple(w for w, k in zip(t, known, strict=True) if not k))
    T = max(len(w) for w in words)
    _limits.check_size(n=len(words), T=T, d=1, limits=L)
    check_int("words per sentence", T, 1, MAX_T)
    return Encoded(words=tuple(words), rows=tuple(rows), unknown=tuple(unknown))


def pca_basis(U: np.ndarray, d: int) -> np.ndarray:
    """(50, d): the top-d right singular vectors of the unit word vectors U (k, 50), each
    signed so that its largest entry is positive (deterministic)."""
    _, _, Vt = np.linalg.svd(U, full_matrices=True)
    P = Vt[:d].T
    j = np.argmax(np.abs(P), axis=0)
    return P * np.sign(P[j, np.arange(d)])


def _project(U: np.ndarray, P: np.ndarray | None) -> np.ndarray:
    if P is None:
        return U
    Y = U @ P
    nrm = np.linalg.norm(Y, axis=-1, keepdims=True)
    if np.any(nrm < 1e-12):
        raise ValueError(
            "`d` must keep every word visible; got a word orthogonal to the top-d directions"
        )
    return Y / nrm


@lru_cache(maxsize=4)
def lexicon(name: str):
    """The labelled word lexicon `name` ("sentiment" or "topic") as (words, labels ±1/0)."""
    if name not in LEXICONS:
        raise _err("head", f"one of {list(LEXICONS)} or a (d,) vector", name)
    import pandas as pd

    df = pd.read_csv(DATA / "lexicon.csv")
    df = df[df["lexicon"] == name]
    return tuple(df["word"]), df["label"].to_numpy(np.float64)


def fit_head(name: str, basis: np.ndarray | None = None, *, ridge: float = RIDGE) -> np.ndarray:
    """v = argmin_v Σ_w (vᵀx_w − y_w)² + ridge ‖v‖² over the lexicon's words w (labels
    y_w ∈ {+1, −1, 0}, 0 for neutral words), x_w their unit vectors in `basis` (None: raw)."""
    words, y = lexicon(name)
    Xw = _project(vectors.unit_vectors(vectors.rows(words)), basis)
    d = Xw.shape[1]
    return np.linalg.solve(Xw.T @ Xw + ridge * np.eye(d), Xw.T @ y)


@dataclass(frozen=True, eq=False)
class TextProblem:
    """A sentence problem with what it came from.

    problem: the `Problem` (X (n, T, d) zero-padded, `lengths` the word counts);
    words / unknown: per sentence, the words kept (token t is words[i][t]) and the words
    not in the vocabulary; basis: (50, d) PCA basis or None (raw vectors); query, head: as
    asked."""

    problem: Problem
    words: tuple
    unknown: tuple
    basis: np.ndarray | None
    query: str
    head: str


def _check_query(query, d: int):
    if not isinstance(query, str):
        raise _err("query", "'mean', 'first' or 'word:<w>'", query)
    if query in QUERIES:
        return None
    if query.startswith("word:"):
        w = tokenize(query[5:])
        r = vectors.rows(w)
        if len(w) != 1 or r[0] < 0:
            raise _err("query", "'word:<w>' with one word w of the GloVe vocabulary", query)
        return r
    raise _err("query", "'mean', 'first' or 'word:<w>'", query)


def build(
    sentences, labels, *, query: str = "mean", head="sentiment", d: int | None = None, limits=None
) -> TextProblem:
    """`sentence_problem` with its words, unknown words and PCA basis (see there)."""
    sentences = check_sentences(sentences, limits=limits)
    y = check_labels(labels, len(sentences))
    d = vectors.DIM if d is None else check_int("d", d, 1, vectors.DIM)
    if isinstance(head, str):
        if head not in LEXICONS:
            raise _err("head", f"one of {list(LEXICONS)} or a ({d},) vector", head)
    else:
        v = np.asarray(head, dtype=np.float64)
        if v.shape != (d,) or not np.all(np.isfinite(v)) or not np.any(v):
            raise _err(
                "head",
                f"one of {list(LEXICONS)} or a finite non-zero ({d},) vector",
                f"shape {v.shape}",
            )
    qrow = _check_query(query, d)
    enc = encode(sentences, limits=limits)
    lengths = np.array([len(w) for w in enc.words])
    n, T = len(lengths), int(lengths.max())
    flat = np.concatenate(enc.rows)
    U = vectors.unit_vectors(flat)  # (Σ T_i, 50)
    basis = None
    if d < vectors.DIM:
        basis = pca_basis(vectors.unit_vectors(np.unique(flat)), d)
    Ud = _project(U, basis)
    X = np.zeros((n, T, d))  # (n, T, d) zero-padded
    X[np.arange(T)[None, :] < lengths[:, None]] = Ud
    Z = None
    if query == "mean":
        Z = np.stack([X[i, : lengths[i]].mean(0) for i in range(n)])
        Z = Z / np.linalg.norm(Z, axis=1, keepdims=True)
    elif qrow is not None:
        Z = np.repeat(_project(vectors.unit_vectors(qrow), basis), n, axis=0)
    v = fit_head(head, basis) if isinstance(head, str) else np.asarray(head, dtype=np.float64)
    prob = Problem(
        X=X, Y=y, Z=Z, v=v, lengths=lengths, name=f"sentences(n={n}, T≤{T}, d={d}, query={query})"
    )
    return TextProblem(
        problem=prob,
        words=enc.words,
        unknown=enc.unknown,
        basis=basis,
        query=query,
        head=head if isinstance(head, str) else "given",
    )


def sentence_problem(
    sentences, labels, *, query: str = "mean", head="sentiment", d: int | None = None, limits=None
) -> Problem:
    """Sentences and their labels as a `Problem` (module doc).

    Args:
        sentences: list of n strings (tokenized by `tokenize`).
        labels: n labels, each +1 or −1.
        query: "mean", "first" or "word:<w>".
        head: "sentiment" or "topic" (a linear head fitted on that lexicon, `fit_head`), or
            a (d,) vector v. (To train v together with W, pass the problem to
            `attsvm.train(..., train_v=True)`: the fitted v is then its initialization.)
        d: 1 … 50; below 50 the vectors are PCA-projected (module doc). None: 50, raw.
        limits: an `attsvm.limits.Limits` (default: the active mode's caps on text, n, T).

    Raises ValueError naming the field: no sentences, labels of another length or not ±1,
    a sentence with no known word, control characters, text over the mode's caps.
    """
    return build(sentences, labels, query=query, head=head, d=d, limits=limits).problem


def task(name: str):
    """A bundled task (`TASKS`): (sentences, labels (n,), key words) from data/tasks.csv."""
    if name not in TASKS:
        raise _err("task", f"one of {list(TASKS)}", name)
    import pandas as pd

    df = pd.read_csv(DATA / "tasks.csv")
    df = df[df["task"] == name]
    return list(df["sentence"]), df["label"].to_numpy(np.float64), list(df["key"])


def key_positions(words, keys) -> np.ndarray:
    """(n,) the position of each sentence's key word among its kept words (−1 if absent)."""
    return np.array([ws.index(k) if k in ws else -1 for ws, k in zip(words, keys, strict=True)])


def parse_labelled(text: str, *, limits=None):
    """Lines "+ sentence" / "- sentence" (also "+1", "-1", "pos", "neg") as (sentences,
    labels); blank lines are skipped. ValueError naming the line otherwise."""
    if not isinstance(text, str):
        raise _err("text", "a string", type(text).__name__)
    L = limits or _limits.current()
    _limits.check_text(chars=len(text), words=len(text.split()), limits=L)
    sentences, labels = [], []
    for k, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line:
            continue
        m = re.match(r"^(\+1|-1|\+|-|pos|neg)\s*[:|,]?\s+(.*)$", line, flags=re.I)
        if not m:
            raise ValueError(
                f"`text` line {k} must start with a label (+ or -) then the "
                f"sentence; got {line[:40]!r}"
            )
        sentences.append(m.group(2))
        labels.append(1.0 if m.group(1).lower() in ("+", "+1", "pos") else -1.0)
    if not sentences:
        raise ValueError("`text` must hold at least one labelled sentence; got none")
    return sentences, np.array(labels)
