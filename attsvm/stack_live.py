"""The "Deeper: a hierarchy of SVMs" page's computations (docs/hierarchy.md): its settings,
the live run of `attsvm.train_stack` in equal chunks (one compiled program), the audit of
every head and the tidy frames the charts read. No Streamlit.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from . import limits
from .problems import Problem, check_choice, check_float, check_int, random_problem
from .stack import (
    StackAudit,
    StackRun,
    audit_stack,
    evaluated,
    random_values,
    stack_init,
    train_stack,
    values_default,
)

CHUNKS = 10  # a live run: this many equal chunks, each one call of the same program
RECORDS = 200  # records per run, at most
VALUES = ("shared", "random")
MAX_LAYERS, MAX_HEADS = 3, 4


@dataclass(frozen=True)
class StackSpec:
    """The page's settings (hashable: a cache key). The problem is
    `random_problem(n, T, d, seed, attention="self", query_index=T − 1)`: the readout is
    the last token. values: "shared" (`stack.values_default`, U = I / H) or "random"
    (`random_values`)."""

    layers: int = 2
    heads: int = 2
    n: int = 8
    T: int = 8
    d: int = 16
    seed: int = 0
    steps: int = 2000
    lr: float = 0.1
    residual: bool = True
    causal: bool = False
    values: str = "shared"

    def checked(self) -> "StackSpec":
        """The spec with every setting validated (ValueError naming the bad one)."""
        check_choice("values", self.values, VALUES)
        for name in ("residual", "causal"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise ValueError(f"`{name}` must be True or False; got {getattr(self, name)!r}")
        return replace(
            self,
            layers=check_int("layers", self.layers, 1, MAX_LAYERS),
            heads=check_int("heads", self.heads, 1, MAX_HEADS),
            n=check_int("n", self.n, 1, limits.MAX_N),
            T=check_int("T", self.T, 2, limits.MAX_T),
            d=check_int("d", self.d, 1, limits.MAX_D),
            seed=check_int("seed", self.seed, 0, 2**31 - 1),
            steps=check_int("steps", self.steps, 1, 1_000_000),
            lr=check_float("lr", self.lr, 0.0, 10.0, lo_open=True),
        )

    def problem(self) -> Problem:
        return random_problem(
            self.n, self.T, self.d, self.seed, attention="self", query_index=self.T - 1
        )

    def value_matrices(self) -> np.ndarray:
        if self.values == "shared":
            return values_default(self.layers, self.heads, self.d)
        return random_values(self.layers, self.heads, self.d, self.seed)


def check_budget(spec: StackSpec) -> float:
    """Refuse a run over the active mode's budget (`limits.check_stack`, plus the L·H SVM
    solves of its audit); return its work."""
    s = spec
    work = limits.check_stack(
        n=s.n,
        T=s.T,
        d=s.d,
        layers=s.layers,
        heads=s.heads,
        steps=s.steps,
        record_every=_every(s.steps)[1],
    )
    work += limits.check_svm(
        solves=s.layers * s.heads,
        n=s.n,
        T=s.T,
        d=s.d,
        queries="sequence" if s.layers > 1 else "single",
    )
    return limits.check_work(work, what="GD on the stack and the SVMs of its heads")


def _every(steps: int) -> tuple[int, int]:
    """(chunks, record interval): CHUNKS equal chunks when they divide `steps`, else one;
    the smallest interval dividing a chunk with at most RECORDS records in all."""
    chunks = CHUNKS if steps % CHUNKS == 0 else 1
    per = steps // chunks
    every = next(r for r in range(max(1, -(-steps // RECORDS)), per + 1) if per % r == 0)
    return chunks, every


def chunk(prob: Problem, spec: StackSpec, init, steps: int, every: int) -> StackRun:
    """One chunk of the live run: `steps` steps of per-head normalized GD from `init`."""
    return train_stack(
        prob,
        layers=spec.layers,
        heads=spec.heads,
        steps=steps,
        lr=spec.lr,
        residual=spec.residual,
        causal=spec.causal,
        values=spec.value_matrices(),
        init=init,
        seed=spec.seed,
        record_every=every,
    )


def start(spec: StackSpec) -> StackRun:
    """The run's first record, step 0 (the default init `stack.stack_init`), evaluated
    without compiling GD: what the page draws while the first chunk compiles."""
    prob = spec.problem()
    W0 = stack_init(prob, spec.layers, spec.heads, seed=spec.seed)
    return evaluated(prob, W0, spec.value_matrices(), residual=spec.residual, causal=spec.causal)


def live_run(spec: StackSpec, on_chunk=None, *, chunk=chunk) -> StackRun:
    """The whole run in equal chunks (one compiled program); `on_chunk(run_so_far)` after
    each. The same records as one call, to rounding (each chunk starts from the last one's
    final parameters)."""
    prob = spec.problem()
    chunks, every = _every(spec.steps)
    per = spec.steps // chunks
    parts, init, run = [], None, None
    for c in range(chunks):
        part = chunk(prob, spec, init, per, every)
        parts.append(part if c == 0 else _shifted(part, c * per))
        init = part.final
        run = _join(parts)
        if on_chunk is not None:
            on_chunk(run)
    return run


def _shifted(part: StackRun, at: int) -> StackRun:
    """A later chunk without its first record (the previous chunk's last), steps shifted."""
    return replace(
        part,
        W=part.W[1:],
        attention=part.attention[1:],
        loss=part.loss[1:],
        grad_norm=part.grad_norm[1:],
        steps=part.steps[1:] + at,
    )


def _join(parts) -> StackRun:
    cat = lambda f: np.concatenate([getattr(p, f) for p in parts])  # noqa: E731
    last = parts[-1]
    return replace(
        last,
        W=cat("W"),
        attention=cat("attention"),
        loss=cat("loss"),
        grad_norm=cat("grad_norm"),
        steps=cat("steps"),
        settings=dict(last.settings, steps=int(last.steps[-1])),
    )


# -- frames ---------------------------------------------------------------------------------------
def _rows(prob: Problem, L: int, layer: int) -> np.ndarray:
    """The query rows a layer's heads are read at: q in the last layer, every token before."""
    return np.array([prob.query_index]) if layer == L - 1 else np.arange(prob.T)


def live_frame(prob: Problem, run: StackRun) -> pd.DataFrame:
    """Per record, layer and head: the mean top attention weight over the rows that layer
    is read at (1 when every row has selected one key) and ‖W^{l,h}‖_F."""
    S = run.attention  # (k, L, H, n, T, T)
    k, L, H = S.shape[:3]
    out = []
    for l in range(L):
        top = S[:, l, :, :, _rows(prob, L, l), :].max(-1)  # rows first: (r, k, H, n)
        top = top.mean(axis=(0, 3))
        for h in range(H):
            out.append(
                pd.DataFrame(
                    dict(
                        step=run.steps,
                        layer=l + 1,
                        head=h + 1,
                        top_weight=top[:, h],
                        norm=np.linalg.norm(run.W[:, l, h], axis=(-2, -1)),
                    )
                )
            )
    return pd.concat(out, ignore_index=True)


def cos_frame(run: StackRun, audit: StackAudit) -> pd.DataFrame:
    """Per record, layer and head: cos(W^{l,h}(k), W^mm_{l,h}), W^mm the Att-SVM of the head's
    final selection on its own final inputs (NaN where it has none)."""
    L, H = run.W.shape[1:3]
    out = []
    for l in range(L):
        for h in range(H):
            Wmm = audit.svm(l, h)
            W = run.W[:, l, h]
            if Wmm is None:
                c = np.full(len(W), np.nan)
            else:
                c = np.einsum("kde,de->k", W, Wmm) / (
                    np.linalg.norm(W, axis=(-2, -1)) * np.linalg.norm(Wmm)
                )
            out.append(pd.DataFrame(dict(step=run.steps, layer=l + 1, head=h + 1, cos=c)))
    return pd.concat(out, ignore_index=True)


def last_layer_frame(prob: Problem, run: StackRun, audit: StackAudit) -> pd.DataFrame:
    """The last layer's final attention at the query token: one row per (head, sequence,
    key) with its weight, whether the head selects it and whether it is the one-layer
    picture's optimal token (`attsvm.optimal_tokens`)."""
    S = run.attention[-1, -1, :, :, prob.query_index, :]  # (H, n, T)
    H, n, T = S.shape
    h, i, t = np.meshgrid(np.arange(H), np.arange(n), np.arange(T), indexing="ij")
    sel = audit.selections[-1, :, :, prob.query_index]  # (H, n)
    opt = audit.optimal if audit.optimal is not None else np.full(n, -1)
    return pd.DataFrame(
        dict(
            head=h.ravel() + 1,
            seq=i.ravel(),
            token=t.ravel(),
            weight=S.ravel(),
            selected=(sel[h, i] == t).ravel(),
            optimal=(opt[i] == t).ravel(),
        )
    )


def early_layer_frame(audit: StackAudit, layer: int) -> pd.DataFrame:
    """Layer `layer` (0-based, not the last): per head, query token t and key s, the share
    of sequences in which t selects s (kept under τ)."""
    sel = audit.selections[layer]  # (H, n, T)
    H, n, T = sel.shape
    out = []
    for h in range(H):
        share = np.stack([(sel[h] == s).mean(axis=0) for s in range(T)], axis=1)  # (t, s)
        t, s = np.meshgrid(np.arange(T), np.arange(T), indexing="ij")
        out.append(
            pd.DataFrame(
                dict(
                    layer=layer + 1, head=h + 1, query=t.ravel(), key=s.ravel(), share=share.ravel()
                )
            )
        )
    return pd.concat(out, ignore_index=True)


def head_table(audit: StackAudit, prob: Problem) -> pd.DataFrame:
    """One row per head: coverage, cos and cos_span with its own SVM, the SVM's status and
    certificate, and (last layer) the share of sequences selecting the optimal token."""
    L, H = audit.cos.shape
    rows = []
    for l in range(L):
        for h in range(H):
            a = audit.heads[l][h]
            opt = np.nan
            if l == L - 1 and audit.optimal is not None:
                opt = float(np.mean(audit.selections[l, h, :, prob.query_index] == audit.optimal))
            sol = a.svm
            rows.append(
                dict(
                    layer=l + 1,
                    head=h + 1,
                    coverage=a.coverage,
                    cos=a.cos,
                    cos_span=a.cos_span,
                    svm=None if sol is None else sol.status,
                    gap=None if sol is None else sol.gap,
                    constraints=a.n_constraints,
                    selects_optimal=opt,
                )
            )
    return pd.DataFrame(rows)


def audit(spec: StackSpec, run: StackRun, *, tau: float = 0.5) -> StackAudit:
    """`attsvm.audit_stack` of the page's run on its problem."""
    return audit_stack(spec.problem(), run, tau=tau)


def summary(prob: Problem, run: StackRun, audit: StackAudit) -> str:
    """A few sentences on what the run shows (markdown)."""
    L, H = audit.cos.shape
    reach = np.nan_to_num(audit.cos, nan=-1.0) >= 0.99
    parts = [f"After {int(run.steps[-1]):,} steps the loss is {run.loss[-1]:.4g}."]
    for l in range(L):
        where = "at the query token" if l == L - 1 else "at every token"
        same = audit.agree[l][~np.eye(H, dtype=bool)] if H > 1 else np.array([])
        agree = (
            f" Heads select the same key in {np.nanmean(same):.0%} of the rows both keep."
            if same.size and np.isfinite(same).any()
            else ""
        )
        parts.append(
            f"**Layer {l + 1}** ({where}): {int(reach[l].sum())} of {H} heads at "
            f"cos ≥ 0.99 with their own SVM (cos {_span(audit.cos[l])}).{agree}"
        )
    if audit.optimal is not None:
        hit = (audit.selections[-1, :, :, prob.query_index] == audit.optimal).mean(axis=1)
        parts.append(
            "The last layer selects the one-layer picture's optimal token in "
            + ", ".join(f"{x:.0%}" for x in hit)
            + " of the sequences (per head)."
        )
    return "  \n".join(parts)


def _span(c: np.ndarray) -> str:
    c = c[np.isfinite(c)]
    if not c.size:
        return "no SVM"
    return (
        f"{c.min():.3f}" if c.size == 1 or c.min() == c.max() else f"{c.min():.3f} … {c.max():.3f}"
    )
