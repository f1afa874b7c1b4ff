"""The two experiments of *Mechanics of Next Token Prediction with Self-Attention*
(arXiv 2403.08081; the authors' two notebooks), as `reproduce ntp-global` and
`reproduce ntp-local`.

ntp-global (`mc_next_single_layer_global_converge.ipynb`): per instance (n=6, T=4, K=6,
d=8, a cycle in some TPG), normalized GD (η = 0.01, 4000 steps, NLL, identity head) from
PyTorch's default init; W^fin by the same GD from 0 on the reduced data; the Graph-SVM;
R by least squares. Per iteration: corr(W, W^svm), corr(W, W^fin + R·W^svm),
corr(W^svm, W − Π_S W), ‖Π_S W − W^fin‖ and the attention mass on the top SCC.

ntp-local (`mc_next_single_layer_local_converge.ipynb`): the 'gen' head (logits E X_iᵀ s_i)
with the squared loss (1 − softmax_y)², η = 0.1, 2000 steps. GD then converges only locally:
the selected tokens C_i (mass > 1e-2) define local TPGs and a local Graph-SVM W^lmm, which
explains W where the global W^gmm does not.

Instances are drawn by `random_ntp_problem(seed = seed + r)`: the authors' torch stream
cannot be replayed (each `nn.Linear` it builds consumes it). `fixtures=DIR` reruns the authors' own
instances (ntp_global_instance*.npz) and compares with their stored numbers.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from .. import limits
from ..metrics import correlation
from ..ntp import (
    NTPProblem,
    gd,
    local_graphs,
    loss_floor,
    priority_graphs,
    random_ntp_problem,
    solve_graph_svm,
)
from ..ntp.gd import curves
from ..ntp.problem import check_sizes
from ..problems import check_float, check_int
from .core import Experiment, Progress, Result, fmt, gd_price, mean_std, no_progress, settings_dict

# The authors' printed numbers (the saved outputs of their notebooks), instances 0-9.
GLOBAL_CORR = (
    0.98744261,
    0.98757892,
    0.98401835,
    0.98774575,
    0.98767699,
    0.99123754,
    0.97859767,
    0.97615322,
    0.98601229,
    0.99279535,
)
GLOBAL_R = (
    9.1891452,
    8.74828919,
    9.2326851,
    7.34529905,
    9.80228406,
    8.23551281,
    8.50083489,
    8.6492329,
    6.66393629,
    7.66538466,
)
LOCAL_GMM = (
    0.26379102,
    0.747186,
    0.50562599,
    0.78473453,
    0.82797967,
    0.94877882,
    0.93374448,
    0.41001696,
    0.5195011,
    0.52117378,
)
LOCAL_LMM = (
    0.99887992,
    0.99209596,
    0.99952876,
    0.9970317,
    0.99857763,
    0.99940865,
    0.99917508,
    0.99583999,
    0.99928289,
    0.99951486,
)

PAPER = {
    "ntp-global": (
        "authors' notebook, 10 instances: mean corr(W, W^svm) 0.98593 (0.97615-0.99280), "
        "corr(W, W^fin + R·W^svm) the same to 4e-4, R 6.66-9.80, top-SCC attention mass "
        "≈ 1 - 3e-4 at 4000 steps, loss floors (m/6)·ln 2; ~30 min on CPU"
    ),
    "ntp-local": (
        "authors' notebook, 10 instances: corr(W, W^gmm) 0.264-0.949 (below 0.95 on 7), "
        "corr(W, W^lmm) 0.99209-0.99953 (mean 0.99793); local reduced data empty on all 10 "
        "(W^fin_l = 0). 8 froze at ‖∇L‖ < ε = 2⁻⁵² (printed normalized gradient < 1) with R_l "
        "35.7-37.5; instances 1 and 7 never did (1.0000 at every print) and end at R_l "
        "11.2/11.7, corr(W, W^lmm) 0.99210/0.99584 — the signature of a cycle among the "
        "selected tokens (inferred, not printed); ~30 min on CPU"
    ),
}
NOTES = {
    "ntp-global": (
        "The top-SCC mass here is the attention on the label's SCC (the highest-priority SCC "
        "of the sequence); the authors plot the largest mass over all SCCs, which is the same "
        "once it exceeds 1/2.",
        "‖Π_S W − W^fin‖ at the last step sits at the NGD oscillation floor (≈ lr/2) where "
        "W^fin = 0 by symmetry; its exact value there is rounding-sensitive (compare it "
        "with 2·lr, not exactly).",
    ),
    "ntp-local": (
        "The authors' 'softmax probability' curve of this experiment sums the gen-head logits "
        "over SCC members and can exceed 1; here the plotted mass "
        "is attention.",
        "Statistic: the authors' corr(W, W^lmm) at the last step, reported separately for "
        "instances whose local graphs are acyclic and for those where GD composes two selected "
        "tokens (a local cycle). There NGD's normalized step is spent oscillating in the "
        "cyclic part (‖∇L‖ stays ≈1e-4), so R_l grows only logarithmically (measured on our "
        "instance 3: corr 0.9835, 0.9853, 0.9868, 0.9880 at 2000, 4000, 8000, 16000 steps) "
        "while what the first steps left outside W^lmm and the cyclic subspace stays "
        "(instance 3: ‖W − R_l·W^lmm‖ = 5.16 at step 250, 5.61 at 2000, against ‖W‖ = 31; "
        "W_0 is not it: corr(W − W_0, W^lmm) is 0.9852 against 0.9835); at 2000 steps "
        "corr(W, W^lmm) is ≥ 0.99 on some such instances only (2 of 9 in our first 40 "
        "draws; the authors' two: 0.99210, 0.99584). "
        "Acyclic instances instead end at ‖∇L‖ ≈ 1e-17-1e-14, where the normalizer's "
        "ε = 2⁻⁵² shrinks the step (they freeze, the softmax-gradient cancellation); running "
        "them longer lets rounding noise drift W (our instance 0: 0.9997 at 2000, 0.9974 at "
        "16000 steps), so more steps is no remedy.",
        "As in the authors' code, tokens with ambiguous mass (9e-3, 1e-2] leave the local "
        "graph but still enter the local SVM's constraints.",
    ),
}


@dataclass(frozen=True, kw_only=True)
class Settings:
    """n, T, K, d: data sizes; instances: how many; steps, lr, record_every: NGD;
    head, loss: the model; seed: data seed of instance 0 (instance r uses seed + r);
    init_seed: W_0 draws; select, ambiguous: thresholds of the local graph (ntp-local);
    fixtures: a folder of the authors' ntp_global_instance*.npz to rerun instead ("")."""

    n: int = 6
    T: int = 4
    K: int = 6
    d: int = 8
    instances: int = 10
    steps: int = 4000
    lr: float = 0.01
    record_every: int = 10
    head: str = "iden"
    loss: str = "nll"
    seed: int = 0
    init_seed: int = 0
    select: float = 1e-2
    ambiguous: float = 9e-3
    fixtures: str = ""

    def __post_init__(self):
        check_sizes(self.n, self.T, self.K, self.d)  # the generator's own checks
        check_int("instances", self.instances, 1, 500)
        gd._settings(self.steps, self.lr, self.loss, self.head, "ngd", self.record_every)
        check_int("seed", self.seed, 0, 2**31)
        check_int("init_seed", self.init_seed, 0, 2**31)
        check_float("select", self.select, 0.0, 1.0, lo_open=True)
        check_float("ambiguous", self.ambiguous, 0.0, self.select)
        if not isinstance(self.fixtures, str):
            raise ValueError(f"`fixtures` must be a folder name (a string); got {self.fixtures!r}")


@dataclass(frozen=True, kw_only=True)
class LocalSettings(Settings):
    steps: int = 2000
    lr: float = 0.1
    record_every: int = 10
    head: str = "gen"
    loss: str = "lsq2"


def _instances(s: Settings):
    """(problems, inits, stored) — stored: the authors' arrays per instance or None."""
    if s.fixtures:
        files = sorted(Path(s.fixtures).glob("ntp_global_instance*.npz"))[: s.instances]
        if not files:
            raise ValueError(
                f"`fixtures` must name a folder with ntp_global_instance*.npz; got {s.fixtures!r}"
            )
        Fs = [dict(np.load(f)) for f in files]
        probs = [
            NTPProblem(E=F["E"], tokens=F["idx_token"], labels=F["labels"], name=f.stem)
            for F, f in zip(Fs, files, strict=True)
        ]
        return probs, [F["W0"] for F in Fs], Fs
    probs = [random_ntp_problem(s.n, s.T, s.K, s.d, seed=s.seed + r) for r in range(s.instances)]
    inits = [gd.default_init(p, seed=s.init_seed, index=r) for r, p in enumerate(probs)]
    return probs, inits, [None] * len(probs)


def _train(s: Settings, progress: Progress):
    """Both experiments' start: the instances, NGD on W from W_0 and on the reduced data for
    W^fin from 0. Returns (problems, stored, trajectories of W, of W^fin). The whole run is
    priced by `price` (the registry refuses it over budget before it starts)."""
    probs, inits, stored = _instances(s)
    cfg = gd._settings(s.steps, s.lr, s.loss, s.head, "ngd", s.record_every)
    progress(0.05, f"gradient descent on W and W^fin: {len(probs)} instances")
    tr = gd.run_batch([gd.problem_data(p) for p in probs], inits, **cfg)
    fin = gd.solve_wfin(probs, s.steps, s.lr, loss=s.loss, head=s.head, record_every=s.record_every)
    return probs, stored, tr, fin


def _per_instance(probs, progress: Progress, start: float, one) -> list:
    """[one(r, p) for each instance], reporting progress from `start` to 1."""
    out = []
    for r, p in enumerate(probs):
        out.append(one(r, p))
        progress(start + (1 - start) * (r + 1) / len(probs), f"instance {r}")
    return out


def _long(frames: list[pd.DataFrame], measures) -> pd.DataFrame:
    long = pd.concat([f.assign(instance=r) for r, f in enumerate(frames)], ignore_index=True)
    long = long.melt(
        id_vars=["instance", "step"],
        value_vars=list(measures),
        var_name="measure",
        value_name="value",
    ).dropna(subset=["value"])
    return mean_std(long, ["measure", "step"], "value")


def _global_summary(inst: pd.DataFrame) -> dict:
    """The ntp-global summary over the feasible instances: correlations with W^svm and the
    fit, R, top-SCC mass, the W^fin gap and the loss floor, beside the paper's numbers."""
    ok = inst[inst.feasible]
    text = (
        f"{len(ok)} instances: mean corr(W, W^svm) {fmt(ok.corr_svm.mean(), 5)} "
        f"({fmt(ok.corr_svm.min(), 4)}-{fmt(ok.corr_svm.max(), 4)}), "
        f"corr(W, W^fin + R·W^svm) {fmt(ok.corr_fit.mean(), 5)}, "
        f"R {fmt(ok.R.min(), 3)}-{fmt(ok.R.max(), 3)}, "
        f"top-SCC mass {fmt(ok.top_mass.mean(), 5)}, "
        f"max ‖Π_S W − W^fin‖ {fmt(ok.wfin_gap.max(), 3)}, "
        f"loss − floor ≤ {fmt((ok.loss_final - ok.loss_floor).max(), 3)}"
    )
    if len(ok) < len(inst):
        text += f"; Graph-SVM infeasible on {len(inst) - len(ok)}"
    summary = dict(
        paper=PAPER["ntp-global"],
        text=text,
        ours_mean_corr_svm=float(ok.corr_svm.mean()),
        paper_mean_corr_svm=float(np.mean(GLOBAL_CORR)),
    )
    if "authors_corr_svm" in ok:
        summary["rows"] = ok[
            ["instance", "corr_svm", "authors_corr_svm", "R", "authors_R"]
        ].to_dict("records")
    return summary


def run_global(s: Settings = Settings(), *, progress: Progress = no_progress) -> Result:
    probs, stored, tr, fin = _train(s, progress)
    progress(0.6, "Graph-SVMs")
    frames = []

    def one(r, p):
        svm = solve_graph_svm(p)
        if not svm.feasible:
            return dict(instance=r, feasible=False, status=svm.status)
        c = curves(p, tr[r], fin[r], svm.W)
        frames.append(c)
        last = c.iloc[-1]
        row = dict(
            instance=r,
            feasible=True,
            cyclic_graphs=int(priority_graphs(p).cyclic.sum()),
            corr_svm=last.corr_svm,
            corr_fit=last.corr_fit,
            corr_perp=last.corr_perp,
            R=last.R,
            wfin_gap=last.wfin_gap,
            top_mass=last.top_mass,
            loss_0=c.loss.iloc[0],
            loss_final=last.loss,
            wfin_loss=fin[r].loss[-1],
            loss_floor=loss_floor(p) if s.head == "iden" and s.loss == "nll" else np.nan,
            svm_norm=svm.objective,
        )
        if stored[r] is not None:
            F = stored[r]
            row.update(
                authors_corr_svm=correlation(F["W_at_steps"][-1], F["W_svm_scs"]),
                authors_R=float(F["R"][0]),
            )
        elif s == Settings() and r < len(GLOBAL_CORR):
            row.update(authors_corr_svm=GLOBAL_CORR[r], authors_R=GLOBAL_R[r])
        return row

    inst = pd.DataFrame(_per_instance(probs, progress, 0.6, one))
    summary = _global_summary(inst)
    return Result(
        name="ntp-global",
        frames={
            "curves": _long(
                frames, ("corr_svm", "corr_fit", "corr_perp", "wfin_gap", "top_mass", "loss", "R")
            ),
            "instances": inst,
        },
        summary=summary,
        settings=settings_dict(s),
        notes=NOTES["ntp-global"],
    )


def _svm_columns(tag: str, p, tr, fin, svm, **graph) -> tuple[dict, dict]:
    """(final values, per-step columns) of one Graph-SVM (`tag` gmm or lmm): corr(W, W^svm)
    (also at half the steps, `corr_{tag}_half`), corr(W, W^fin + R·W^svm) and R; empty where
    it is infeasible."""
    if not svm.feasible:
        return {}, {}
    c = curves(p, tr, fin, svm.W, **graph)
    cols = {f"corr_{tag}": c.corr_svm, f"corr_fit_{tag}": c.corr_fit, f"R_{tag}": c.R}
    last = {k: v.iloc[-1] for k, v in cols.items()}
    half = int(np.searchsorted(tr.steps, tr.steps[-1] / 2))
    return {**last, f"corr_{tag}_half": c.corr_svm.iloc[half]}, cols


# the curves of ntp-local, in plot order (those of an infeasible SVM are left out)
LOCAL_MEASURES = ("corr_gmm", "corr_lmm", "corr_fit_gmm", "corr_fit_lmm", "selected_mass", "loss")


def run_local(s: LocalSettings = LocalSettings(), *, progress: Progress = no_progress) -> Result:
    probs, _, tr, fin = _train(s, progress)
    progress(0.5, "global and local Graph-SVMs")
    frames = []

    def one(r, p):
        lg = local_graphs(p, tr[r].probs[-1], select=s.select, ambiguous=s.ambiguous)
        fin_l = gd.solve_wfin(
            p,
            s.steps,
            s.lr,
            loss=s.loss,
            head=s.head,
            record_every=s.record_every,
            scc=lg.scc,
            anchors=lg.anchors,
        )
        gsvm, lsvm = solve_graph_svm(p), solve_graph_svm(p, lg)
        g_last, g_cols = _svm_columns("gmm", p, tr[r], fin[r], gsvm)
        l_last, l_cols = _svm_columns("lmm", p, tr[r], fin_l, lsvm, scc=lg.scc, anchors=lg.anchors)
        sel = np.array([np.isin(p.tokens[i], lg.winners[i]) for i in range(p.n)])
        frames.append(
            pd.DataFrame(
                dict(
                    step=tr[r].steps,
                    loss=tr[r].loss,
                    **g_cols,
                    **l_cols,
                    selected_mass=(tr[r].probs * sel).sum(-1).mean(-1),
                )
            )
        )
        return dict(
            instance=r,
            global_feasible=gsvm.feasible,
            local_feasible=lsvm.feasible,
            local_status=lsvm.status,
            local_cycles=int(lg.cyclic.sum()),
            **g_last,
            **l_last,
            grad_norm=tr[r].grad_norm[-1],
        )

    inst = pd.DataFrame(_per_instance(probs, progress, 0.5, one))
    text, summary = _local_summary(inst)
    measures = [m for m in LOCAL_MEASURES if m in frames[0]]
    return Result(
        name="ntp-local",
        frames={"curves": _long(frames, measures), "instances": inst},
        summary=dict(
            paper=PAPER["ntp-local"],
            text=text,
            **summary,
            paper_mean_corr_lmm=float(np.mean(LOCAL_LMM)),
        ),
        settings=settings_dict(s),
        notes=NOTES["ntp-local"],
    )


def _local_summary(inst: pd.DataFrame) -> tuple[str, dict]:
    """The local experiment's statistic: the authors' corr(W, W^lmm) at the last step where
    the global Graph-SVM fails (< 0.95), split by the local graphs. Acyclic ones (GD retrieves
    one token per sequence) freeze at R_l ≈ 36 like 8 of the authors' 10; instances with a
    local cycle keep moving with R_l growing logarithmically (the authors' instances 1 and 7
    by their signature): reported with corr(W, W^fin_l + R_l·W^lmm), R_l, ‖∇L‖ and the
    rise of corr(W, W^lmm) over the second half."""
    # (columns of a Graph-SVM infeasible on every instance are NaN)
    svm_cols = [
        c.format(t)
        for t in ("gmm", "lmm")
        for c in ("corr_{}", "corr_fit_{}", "R_{}", "corr_{}_half")
    ]
    inst = inst.reindex(columns=[*inst.columns, *(c for c in svm_cols if c not in inst)])
    low = inst[inst.corr_gmm < 0.95]
    text = (
        f"{len(inst)} instances: corr(W, W^gmm) {fmt(inst.corr_gmm.min(), 3)}-"
        f"{fmt(inst.corr_gmm.max(), 3)} (below 0.95 on {len(low)}); "
        f"corr(W, W^lmm) {fmt(inst.corr_lmm.min(), 5)}-"
        f"{fmt(inst.corr_lmm.max(), 5)} (mean {fmt(inst.corr_lmm.mean(), 5)})"
    )
    flat, cyc = low[low.local_cycles == 0], low[low.local_cycles > 0]
    out = dict(
        ours_min_local_where_global_low=float(low.corr_lmm.min()) if len(low) else None,
        ours_min_local_acyclic_where_global_low=float(flat.corr_lmm.min()) if len(flat) else None,
        local_cycle_instances=int(len(cyc)),
    )
    if len(flat):
        text += (
            f". Where global < 0.95 and every local SCC is a singleton: "
            f"corr(W, W^lmm) ≥ "
            f"{fmt(flat.corr_lmm.min(), 5)} on {len(flat)}/{len(flat)}"
        )
    if len(cyc):
        text += (
            f". Where global < 0.95 with a cycle among the selected tokens "
            f"({len(cyc)}): corr(W, W^lmm) {fmt(cyc.corr_lmm.min(), 5)}-"
            f"{fmt(cyc.corr_lmm.max(), 5)}, corr(W, W^fin_l + R_l·W^lmm) "
            f"{fmt(cyc.corr_fit_lmm.min(), 5)}-{fmt(cyc.corr_fit_lmm.max(), 5)}, R_l "
            f"{fmt(cyc.R_lmm.min(), 3)}-{fmt(cyc.R_lmm.max(), 3)}, ‖∇L‖ ≥ "
            f"{fmt(cyc.grad_norm.min(), 2)}"
        )
        if len(flat):
            text += (
                f" (acyclic: R_l {fmt(flat.R_lmm.min(), 3)}-{fmt(flat.R_lmm.max(), 3)}, "
                f"‖∇L‖ ≤ {fmt(flat.grad_norm.max(), 2)})"
            )
        text += (
            f"; corr(W, W^lmm) rose over the second half on "
            f"{int((cyc.corr_lmm > cyc.corr_lmm_half).sum())}/{len(cyc)} (mean "
            f"{fmt(cyc.corr_lmm_half.mean(), 4)} → {fmt(cyc.corr_lmm.mean(), 4)})"
        )
        out["ours_min_local_cyclic_where_global_low"] = float(cyc.corr_lmm.min())
    bad = int((~inst.local_feasible).sum())
    if bad:
        text += f"; local Graph-SVM infeasible on {bad}"
    return text, out


# -- the records: what the registry, CLI, store, budget and Reproduce page read -------
def price(s: Settings) -> tuple:
    """Next-token prediction (arXiv 2403.08081): NGD on W and on the reduced data for W^fin
    (twice more for the local variant), and one or two Graph-SVMs per instance."""
    runs = s.instances * (4 if isinstance(s, LocalSettings) else 2)
    item, floats = gd_price(
        f"NGD on W and W^fin ({s.instances} instances)",
        n=s.n,
        T=s.T,
        d=s.d,
        steps=s.steps,
        runs=runs,
        record_every=s.record_every,
        span=False,
    )  # the next-token model: never the span form
    svm = (
        f"{2 * s.instances} Graph-SVMs",
        limits.graph_svm_work(n=s.n, T=s.T, d=s.d, solves=s.instances * 2),
    )
    return (
        [item, svm],
        floats,
        dict(n=s.n, T=s.T, d=s.d, steps=s.steps, runs=runs, solves=2 * s.instances),
    )


RECORDS = (
    Experiment(
        name="ntp-global",
        title="Next-token prediction: global convergence to W^fin + R·W^svm (arXiv 2403.08081)",
        paper=PAPER["ntp-global"],
        notes=NOTES["ntp-global"],
        Settings=Settings,
        run=run_global,
        price=price,
        chart="attsvm_charts.ntp:ntp_global",
        tiny=dict(instances=1, steps=500),
        followup=True,
    ),
    Experiment(
        name="ntp-local",
        title="Next-token prediction: local convergence to the local Graph-SVM (arXiv 2403.08081)",
        paper=PAPER["ntp-local"],
        notes=NOTES["ntp-local"],
        Settings=LocalSettings,
        run=run_local,
        price=price,
        chart="attsvm_charts.ntp:ntp_local",
        tiny=dict(instances=1, steps=500),
        followup=True,
    ),
)
