"""Next-token prediction data (arXiv 2403.08081; `docs/followups.md` §3.1): a vocabulary,
token sequences and the next token of each.

    E = [e_1 … e_K]ᵀ ∈ R^{K×d},   X_i = E[ids_i] ∈ R^{T×d},   z_i = x_iT (the last token),
    y_i ∈ [K] the next token,     logits a_it = x_itᵀ W z_i,   s_i = softmax(a_i).

The theory (with the identity head, the loss is convex only then: `docs/followups.md` §3.2)
needs the T tokens of a sequence to be distinct and the label to occur in its sequence: both
are checked here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..problems import _err, check_int
from .tpg import scc_ids_of

MAX_K, MAX_N, MAX_T, MAX_D = 64, 256, 32, 64


def _int_array(name: str, a, ndim: int) -> np.ndarray:
    try:
        arr = np.array(a, copy=True)
    except (TypeError, ValueError) as exc:
        raise _err(name, "an integer array", type(a).__name__) from exc
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        if not (
            np.issubdtype(arr.dtype, np.floating)
            and np.all(np.isfinite(arr))
            and np.all(arr == np.round(arr))
        ):
            raise _err(name, "an integer array", arr.tolist())
    arr = arr.astype(np.int64)
    if arr.ndim != ndim:
        raise _err(name, f"a {ndim}-d integer array", f"shape {arr.shape}")
    return arr


@dataclass(frozen=True, eq=False)
class NTPProblem:
    """Next-token data. Arrays are copied, validated and frozen on construction.

    Args:
        E: (K, d) vocabulary embeddings e_k (rows).
        tokens: (n, T) token ids in [0, K); distinct within a sequence; the last is the query.
        labels: (n,) next-token ids y_i in [0, K), each occurring in its sequence.
        name: a label for displays.
    """

    E: np.ndarray
    tokens: np.ndarray
    labels: np.ndarray
    name: str = field(default="", compare=False)

    def __post_init__(self):
        try:
            E = np.array(self.E, dtype=np.float64, copy=True)
        except (TypeError, ValueError) as exc:
            raise _err("E", "a numeric (K, d) array", type(self.E).__name__) from exc
        if E.ndim != 2 or E.shape[0] < 2 or E.shape[1] < 1:
            raise _err("E", "a (K, d) array with K ≥ 2, d ≥ 1", f"shape {E.shape}")
        if not np.all(np.isfinite(E)):
            raise _err("E", "finite (no NaN or inf)", "an array with non-finite entries")
        K, d = E.shape
        if K > MAX_K or d > MAX_D:
            raise _err("E", f"at most ({MAX_K}, {MAX_D})", f"shape {E.shape}")
        if np.any(np.linalg.norm(E, axis=1) == 0):
            raise _err(
                "E",
                "free of zero rows (a zero query attends uniformly)",
                f"zero rows {np.flatnonzero(np.linalg.norm(E, axis=1) == 0).tolist()}",
            )
        ids = _int_array("tokens", self.tokens, 2)
        n, T = ids.shape
        if not (1 <= n <= MAX_N and 2 <= T <= MAX_T):
            raise _err(
                "tokens",
                f"an (n, T) array with 1 ≤ n ≤ {MAX_N}, 2 ≤ T ≤ {MAX_T}",
                f"shape {ids.shape}",
            )
        if ids.min() < 0 or ids.max() >= K:
            raise _err(
                "tokens",
                f"ids in [0, {K}) (K = {K} vocabulary rows)",
                f"values from {ids.min()} to {ids.max()}",
            )
        for i, row in enumerate(ids):
            if len(set(row.tolist())) != T:
                raise _err(
                    f"tokens[{i}]",
                    "T distinct ids (the theory of arXiv 2403.08081 "
                    "needs distinct tokens per sequence; with repeats the loss is not "
                    "convex)",
                    row.tolist(),
                )
        y = _int_array("labels", self.labels, 1)
        if y.shape != (n,):
            raise _err("labels", f"an ({n},) array (one per sequence)", f"shape {y.shape}")
        if y.min() < 0 or y.max() >= K:
            raise _err("labels", f"ids in [0, {K})", y.tolist())
        missing = [i for i in range(n) if y[i] not in ids[i]]
        if missing:
            i = missing[0]
            raise _err(
                f"labels[{i}]",
                f"a token of sequence {i} {ids[i].tolist()} (the "
                "identity head gives an absent label probability 0)",
                int(y[i]),
            )
        for a in (E, ids, y):
            a.setflags(write=False)
        object.__setattr__(self, "E", E)
        object.__setattr__(self, "tokens", ids)
        object.__setattr__(self, "labels", y)

    # -- shapes and views --------------------------------------------------------------------
    @property
    def n(self) -> int:
        return self.tokens.shape[0]

    @property
    def T(self) -> int:
        return self.tokens.shape[1]

    @property
    def K(self) -> int:
        return self.E.shape[0]

    @property
    def d(self) -> int:
        return self.E.shape[1]

    @property
    def shape(self) -> tuple:
        """(n, T, K, d)."""
        return (self.n, self.T, self.K, self.d)

    @property
    def last(self) -> np.ndarray:
        """(n,) the query token id k_i = ids_iT of every sequence."""
        return self.tokens[:, -1]

    @property
    def X(self) -> np.ndarray:
        """(n, T, d) token embeddings."""
        return self.E[self.tokens]

    @property
    def Z(self) -> np.ndarray:
        """(n, d) queries z_i = e_{k_i}."""
        return self.E[self.last]

    @property
    def label_pos(self) -> np.ndarray:
        """(n,) position of the label in its sequence."""
        return np.argmax(self.tokens == self.labels[:, None], axis=1)

    def with_(self, *, tokens=None, labels=None, E=None) -> "NTPProblem":
        """A copy with some arrays replaced (validated again)."""
        return NTPProblem(
            E=self.E if E is None else E,
            tokens=self.tokens if tokens is None else tokens,
            labels=self.labels if labels is None else labels,
            name=self.name,
        )


def _has_cycle(tokens: np.ndarray, labels: np.ndarray, K: int) -> bool:
    scc = scc_ids_of(tokens, labels, K)
    for row in scc:
        if row[0] >= 0 and len(set(row.tolist())) < K:
            return True
    return False


def check_sizes(n, T, K, d) -> tuple[int, int, int, int]:
    """(n, T, K, d) as ints: n sequences of T distinct tokens (T ≤ K) from a vocabulary of K
    embeddings in R^d, within MAX_N, MAX_T, MAX_K, MAX_D (else a ValueError naming one)."""
    n = check_int("n", n, 1, MAX_N)
    K = check_int("K", K, 2, MAX_K)
    T = check_int("T", T, 2, min(K, MAX_T))
    d = check_int("d", d, 1, MAX_D)
    return n, T, K, d


def random_ntp_problem(
    n: int = 6,
    T: int = 4,
    K: int = 6,
    d: int = 8,
    seed: int = 0,
    *,
    require_cycle: bool = True,
    max_tries: int = 10_000,
) -> NTPProblem:
    """The authors' generator (arXiv 2403.08081 experiments; `data_utils.data_generator`
    with `token_choice='random'`, `rep_seq=False`, `check_label=True`):

    - E: K rows N(0, I_d), each normalized to unit norm;
    - each sequence: T distinct ids drawn uniformly without replacement (T ≤ K);
    - label: uniform over [K]; if it is not in its sequence, a uniformly drawn token of the
      sequence instead (possibly the query token itself);
    - `require_cycle`: redraw everything until some token-priority graph has a cycle (an
      SCC of size ≥ 2), as the authors' `next_data(check_asyc=False)` does.

    Drawn by ``numpy.random.default_rng(seed)`` (the authors' torch stream cannot be
    reproduced: every `nn.Linear` they build consumes it; rerun their exported instances
    instead, `reproduce ntp-global --set fixtures=DIR`).
    """
    n, T, K, d = check_sizes(n, T, K, d)
    seed = check_int("seed", seed, 0, 2**63 - 1)
    rng = np.random.default_rng(seed)
    for _ in range(max_tries):
        E = rng.standard_normal((K, d))
        E /= np.linalg.norm(E, axis=1, keepdims=True)
        ids = np.stack([rng.permutation(K)[:T] for _ in range(n)])
        y = rng.integers(0, K, n)
        for i in range(n):
            if y[i] not in ids[i]:
                y[i] = ids[i, rng.integers(0, T)]
        if not require_cycle or _has_cycle(ids, y, K):
            return NTPProblem(
                E=E, tokens=ids, labels=y, name=f"random(n={n}, T={T}, K={K}, d={d}, seed={seed})"
            )
    raise ValueError(
        f"`require_cycle` must be satisfiable; no cyclic graph in {max_tries} "
        f"draws of (n={n}, T={T}, K={K})"
    )
