"""What the next-token page computes: the sequence editor's text format, what changed between
two sets of SCCs, the live GD run of W and W^fin (chunked; `chunk` runs one chunk, the app
passes a metered one), its per-record measures and summary."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .. import limits
from ..problems import check_int
from . import gd
from .gd import curves, loss_floor
from .graph import PriorityGraphs, reduced_mask, top_scc_mass, top_scc_tokens
from .problem import MAX_D, MAX_K, NTPProblem, random_ntp_problem

RECORDS = 200  # records of a run; CHUNKS live updates of RECORDS / CHUNKS each
CHUNKS = 10


def parse_sequences(text: str):
    """Lines "t1 t2 … tT : y" (token ids, then the label after ':') -> (tokens, labels)."""
    toks, labs = [], []
    for no, line in enumerate(str(text).splitlines(), 1):
        line = line.split("#")[0].strip()
        if not line:
            continue
        left, sep, right = line.partition(":")
        try:
            ids = [int(v) for v in re.split(r"[\s,]+", left.strip()) if v]
            y = int(right.strip())
        except ValueError:
            ids, y = None, None
        if not sep or not ids or y is None:
            raise ValueError(
                f"`sequences` line {no} must read 'ids : label', e.g. "
                f"'1 2 5 4 : 1'; got {line[:60]!r}"
            )
        toks.append(ids)
        labs.append(y)
    if not toks:
        raise ValueError("`sequences` must hold at least one line 'ids : label'; got none")
    if len({len(t) for t in toks}) > 1:
        raise ValueError(
            f"`sequences` must all have the same length T; got lengths "
            f"{sorted({len(t) for t in toks})}"
        )
    return np.array(toks), np.array(labs)


def format_sequences(tokens, labels) -> str:
    return "\n".join(
        " ".join(str(int(t)) for t in row) + f" : {int(y)}"
        for row, y in zip(tokens, labels, strict=True)
    )


def vocabulary(K: int, d: int, seed: int) -> np.ndarray:
    """K unit-norm Gaussian embeddings in R^d (the authors' 'random' vocabulary)."""
    E = np.random.default_rng([seed, 17]).standard_normal((K, d))
    return E / np.linalg.norm(E, axis=1, keepdims=True)


def _blocks(row) -> set:
    return {frozenset(np.flatnonzero(row == c).tolist()) for c in set(row.tolist())}


def _fmt(block) -> str:
    return "{" + ", ".join(str(t) for t in sorted(block)) + "}"


def describe(g: PriorityGraphs) -> list[str]:
    """One line per graph: its SCCs top first (untouched tokens left out)."""
    out = []
    for k in np.flatnonzero(g.present):
        touched = g.adj[k].any(0) | g.adj[k].any(1)
        comps = [c for c in g.components(k) if touched[c].any()]
        out.append(
            f"G^({k}): " + " ▸ ".join(_fmt(c) + (" (cycle)" if len(c) > 1 else "") for c in comps)
        )
    return out


def scc_changes(old: np.ndarray | None, new: np.ndarray) -> list[str]:
    """What changed between two (K, K) SCC-id arrays: graphs that appeared or vanished,
    SCCs merged or split (sentences for the page)."""
    if old is None or old.shape != new.shape:
        return []
    out = []
    for k in range(new.shape[0]):
        a, b = old[k], new[k]
        if (a[0] < 0) != (b[0] < 0):
            out.append(f"G^({k}) {'appeared' if a[0] < 0 else 'vanished'}")
            continue
        if a[0] < 0:
            continue
        A, B = _blocks(a), _blocks(b)
        for blk in B - A:
            parts = [p for p in A if p <= blk]
            if len(parts) > 1:
                out.append(
                    f"G^({k}): merged "
                    + " and ".join(_fmt(p) for p in parts)
                    + f" into {_fmt(blk)}"
                )
        for blk in A - B:
            parts = [p for p in B if p <= blk]
            if len(parts) > 1:
                out.append(f"G^({k}): split {_fmt(blk)} into " + ", ".join(_fmt(p) for p in parts))
        if A == B and not np.array_equal(a, b):
            out.append(f"G^({k}): same SCCs, new priority order")
    return out


@dataclass(frozen=True, kw_only=True)
class Sequences:
    """The page's data (hashable: the app's cache key): the vocabulary of K unit embeddings
    in R^d drawn with `seed` (`vocabulary`) and the sequences' token ids and labels, held as
    nested tuples of ints and checked by `NTPProblem` on construction."""

    K: int
    d: int
    seed: int = 0
    tokens: tuple
    labels: tuple

    def __post_init__(self):
        object.__setattr__(self, "K", check_int("K", self.K, 2, MAX_K))
        object.__setattr__(self, "d", check_int("d", self.d, 1, MAX_D))
        object.__setattr__(self, "seed", check_int("seed", self.seed, 0, 2**63 - 1))
        p = self.problem()
        object.__setattr__(self, "tokens", tuple(map(tuple, p.tokens.tolist())))
        object.__setattr__(self, "labels", tuple(p.labels.tolist()))

    @classmethod
    def parse(cls, text: str, *, K: int, d: int, seed: int = 0) -> Sequences:
        """The sequences of the editor's text (`parse_sequences`) over this vocabulary."""
        tokens, labels = parse_sequences(text)
        return cls(K=K, d=d, seed=seed, tokens=tokens, labels=labels)

    def problem(self) -> NTPProblem:
        return NTPProblem(
            E=vocabulary(self.K, self.d, self.seed), tokens=self.tokens, labels=self.labels
        )


def check_budget(prob: NTPProblem, steps: int) -> None:
    """Refuse a run over the active mode's budget (W and W^fin, one Graph-SVM)."""
    kw = dict(n=prob.n, T=prob.T, d=prob.d)
    work = limits.check_gd(**kw, steps=steps, runs=2)
    limits.check_size(**kw, solves=1)
    work += limits.graph_svm_work(**kw)
    limits.check_work(work, what=f"GD on W and W^fin for {steps:,} steps and a Graph-SVM")


def chunk(datas, inits, cfg):
    """One chunk of the live run: GD on the batch (W, W^fin)."""
    return gd.run_batch(datas, inits, **cfg)


def live_run(prob: NTPProblem, W0, steps: int, lr: float, on_chunk=None, *, chunk=chunk) -> dict:
    """NGD (NLL, identity head) on W from W0 and on W^fin from 0, in CHUNKS equal chunks
    (one compiled program); `on_chunk(result_so_far)` after each. Returns dict(tr, fin)."""
    chunks = CHUNKS if steps % CHUNKS == 0 else 1
    per_steps = steps // chunks  # every chunk: the same program
    every = max(r for r in range(1, max(1, steps // RECORDS) + 1) if per_steps % r == 0)
    cfg = gd._settings(per_steps, lr, "nll", "iden", "ngd", every)
    datas = [gd.problem_data(prob), gd.problem_data(prob, reduced_mask(prob))]
    W, F = np.asarray(W0, float), np.zeros_like(W0)
    parts = []
    for c in range(chunks):
        tr = chunk(datas, [W, F], cfg)
        keep = slice(0, None) if c == 0 else slice(1, None)
        parts.append((tr, keep))
        W, F = tr.W[0, -1], tr.W[1, -1]
        res = _join(parts, every)
        if on_chunk is not None:
            on_chunk(res)
    return res


def _join(parts, every) -> dict:
    out = {}
    for b, name in ((0, "tr"), (1, "fin")):
        cat = lambda f: np.concatenate([getattr(t, f)[b][k] for t, k in parts])  # noqa: E731
        W = cat("W")
        out[name] = gd.NTPTrajectory(
            W=W,
            probs=cat("probs"),
            loss=cat("loss"),
            grad_norm=cat("grad_norm"),
            steps=np.arange(len(W)) * every,
            settings={},
        )
    return out


def frames(prob: NTPProblem, res: dict, W_svm) -> pd.DataFrame:
    """Per-record measures (`attsvm.ntp.gd.curves`); without a feasible Graph-SVM
    only the loss and the top-SCC mass."""
    tr, fin = res["tr"], res["fin"]
    if W_svm is None:
        return pd.DataFrame(
            dict(step=tr.steps, loss=tr.loss, top_mass=top_scc_mass(prob, tr.probs).mean(-1))
        )
    return curves(prob, tr, fin, W_svm)


def random_text(shape: str, K: int, d: int, seed: int) -> str:
    """The editor's text for the authors' generator at "n x T" (T capped at K)."""
    try:
        n, T = (int(v) for v in str(shape).lower().replace("×", "x").split("x"))
    except ValueError:
        raise ValueError(f"`random n × T` must read like 6x4; got {shape!r}") from None
    p = random_ntp_problem(n, min(T, K), K, d, seed=seed)
    return format_sequences(p.tokens, p.labels)


def summary(prob: NTPProblem, df: pd.DataFrame, steps: int) -> str:
    last = df.iloc[-1]
    try:
        floor = f"{loss_floor(prob):.4f}"
    except ValueError:  # no attained infimum (dependent embeddings)
        floor = "n/a"
    text = (
        f"**After {int(last.step):,} steps:** loss {last.loss:.4f} (floor {floor}), "
        f"attention on the top SCC {last.top_mass:.4f}"
    )
    if "corr_svm" in df and np.isnan(last.corr_svm):
        text += (
            f"; W^svm = 0 (nothing to retrieve: each graph's tokens form one SCC), "
            f"‖Π_S W − W^fin‖ = **{last.wfin_gap:.2e}** (the rest of W is W₀'s part "
            "that no logit difference sees)"
        )
    elif "corr_svm" in df:
        text += (
            f", corr(W, W^svm) **{last.corr_svm:.4f}**, corr(W, W^fin + R·W^svm) "
            f"{last.corr_fit:.4f}, R = {last.R:.3f}, ‖Π_S W − W^fin‖ = "
            f"{last.wfin_gap:.2e}"
        )
    return text


def attention_frame(prob: NTPProblem, probs) -> pd.DataFrame:
    """Final attention (n, T) as rows seq, token, mass, top (in the top SCC)."""
    return pd.DataFrame(
        dict(
            seq=np.repeat(np.arange(prob.n), prob.T),
            token=prob.tokens.ravel(),
            mass=np.asarray(probs).ravel(),
            top=top_scc_tokens(prob).ravel(),
        )
    )


def tables(prob: NTPProblem, df: pd.DataFrame) -> dict:
    """The export's tables: the run's measures, the sequences, the vocabulary."""
    seqs = pd.DataFrame(
        dict(tokens=[" ".join(map(str, r)) for r in prob.tokens], label=prob.labels)
    )
    return {"curves": df, "sequences": seqs, "vocabulary": pd.DataFrame(prob.E)}
