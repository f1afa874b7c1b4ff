"""Settings records: hashable descriptions of a problem and of a GD run.

A `ProblemSpec` rebuilds a `Problem`; a `TrainSpec` turns into the keyword options of
`train` / `train_batch` (`TrainSpec.train_kwargs`). Both are frozen dataclasses of plain
values, so they serve as cache keys and as URL state: two callers with the same records get
the same results. The GD settings follow arXiv 2308.16898 §2 (normalized GD, W or K Qᵀ).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from .problems import PRESETS, Problem, paper_problem, random_problem

SOURCES = ("random", "geometry-1", "geometry-2", "custom")
INITS = ("uniform", "zero")
INIT_LABELS = {
    "uniform": "U(−1/√d, 1/√d) — PyTorch nn.Linear, the paper's random init",
    "zero": "zero — W = 0 (K = 0.1·N(0, I), Q = 0), as the 2-D figures",
}
RECORDS = 200  # records per run kept for charts (record_every = steps / ~RECORDS)
CHUNK_RECORDS = 10  # records advanced per live frame


def norm_for(param: str) -> str:
    """The Att-SVM norm GD on `param` converges to: Frobenius for W, nuclear for K Qᵀ
    (arXiv 2308.16898, Theorems 2 and 3)."""
    return "fro" if param == "W" else "nuc"


@dataclass(frozen=True, kw_only=True)
class ProblemSpec:
    """What defines a problem. `data` holds (X, Y, Z, v) as nested tuples for "custom"."""

    source: str = "random"
    n: int = 6
    T: int = 8
    d: int = 10
    seed: int = 0
    attention: str = "cross"
    head: str = "linear"
    lam: float = 0.5
    queries: str = "single"
    data: tuple | None = None

    def build(self) -> Problem:
        """The problem (raises ValueError with the library's message on bad input)."""
        if self.source in PRESETS:
            prob = paper_problem(self.source)  # linear head, single query
            return prob.with_(Z=None) if self.attention == "self" else prob
        if self.source == "custom":
            if self.data is None:
                raise ValueError("`data` must hold the custom tokens; got None")
            X, Y, Z, v, V = (
                None if a is None else np.array(a, dtype=float) for a in (*self.data, None)[:5]
            )
            return Problem(
                X=X,
                Y=Y,
                Z=None if self.attention == "self" else Z,
                v=v,
                head=self.head,
                V=V,
                lam=self.lam if self.head == "quadratic" else 0.0,
                name="custom",
            )
        return random_problem(
            self.n,
            self.T,
            self.d,
            self.seed,
            self.attention,
            head=self.head,
            queries=self.queries,
            lam=self.lam if self.head == "quadratic" else 0.5,
        )

    def with_(self, **kw) -> "ProblemSpec":
        return replace(self, **kw)

    def label(self) -> str:
        if self.source in PRESETS:
            return f"preset {self.source} ({self.attention}-attention)"
        if self.source == "custom":
            if self.head == "linear":
                return "custom tokens"
            lam = f" λ={self.lam:g}" if self.head == "quadratic" else ""
            return f"custom tokens, {self.head} head{lam}"
        head = self.head + (f" λ={self.lam:g}" if self.head == "quadratic" else "")
        q = "" if self.queries == "single" else f", {self.queries} queries"
        return (
            f"random n={self.n}, T={self.T}, d={self.d}, seed={self.seed}, "
            f"{self.attention}-attention, {head} head{q}"
        )


@dataclass(frozen=True, kw_only=True)
class TrainSpec:
    """GD settings (docs/theory.md §A.1). `m=None` means m = d."""

    param: str = "W"
    m: int | None = None
    loss: str = "logistic"
    lr: float = 0.1
    normalized: bool = True
    steps: int = 500
    init: str = "uniform"
    init_seed: int = 0

    def with_(self, **kw) -> "TrainSpec":
        return replace(self, **kw)

    @property
    def norm(self) -> str:
        """The SVM GD on this parameterization converges to (`norm_for`)."""
        return norm_for(self.param)

    def train_kwargs(self, prob: Problem) -> dict:
        """The options of `train` / `train_batch` this record fixes for `prob` (all but
        `steps`, `init` and `record_every`, which callers choose per call)."""
        return dict(
            param=self.param,
            lr=self.lr,
            normalized=self.normalized,
            loss=self.loss,
            seed=self.init_seed,
            m=self.m_for(prob),
        )

    def m_for(self, prob: Problem) -> int:
        return prob.d if self.m is None else min(int(self.m), prob.d)

    def init_for(self, prob: Problem):
        """`init` for attsvm.train: None (library default, seeded) or explicit arrays."""
        if self.init == "uniform":
            return None
        d, m = prob.d, self.m_for(prob)
        if self.param == "W":
            return np.zeros((d, d))
        # K = Q = 0 is a stationary point of the factorization; the paper starts K small.
        rng = np.random.default_rng([self.init_seed, 1])
        return 0.1 * rng.standard_normal((d, m)), np.zeros((d, m))

    def label(self) -> str:
        gd = "normalized GD" if self.normalized else "plain GD"
        par = "W" if self.param == "W" else f"(K, Q), m={self.m if self.m else 'd'}"
        return (
            f"{par}, {gd}, η={self.lr:g}, {self.loss} loss, {self.steps} steps, "
            f"{self.init} init (seed {self.init_seed})"
        )


def record_every(steps: int, target: int = RECORDS) -> int:
    """The smallest divisor r of `steps` with steps / r ≤ `target` (charts stay light)."""
    lo = max(1, math.ceil(steps / target))
    for r in range(lo, steps + 1):
        if steps % r == 0:
            return r
    return steps


def selection_label(alpha) -> str:
    """α as a short string of 0-based token indices (as the library): (0, 2, 1) -> "0·2·1"."""
    return "·".join(str(int(a)) for a in np.ravel(alpha))


def frozen(a) -> tuple:
    """A nested tuple of floats (hashable) from an array-like."""
    a = np.asarray(a, dtype=float)
    return tuple(frozen(x) for x in a) if a.ndim > 1 else tuple(float(x) for x in a)


def custom_spec(
    X, Y, Z, v, *, attention: str = "cross", head: str = "linear", V=None, lam: float = 0.5
) -> ProblemSpec:
    """A ProblemSpec holding the arrays themselves (tokens edited in a table, an upload):
    v for the linear and quadratic heads (with λ = `lam`), V for the relu head."""
    data = (frozen(X), frozen(Y), frozen(Z), None if v is None else frozen(v))
    if V is not None:
        data += (frozen(V),)
    return ProblemSpec(source="custom", attention=attention, head=head, lam=float(lam), data=data)
