"""Real words: on the bundled sentence tasks (attsvm/text/data), does GD's attention settle
on the word that decides the label, and does W(k) align with the Att-SVM
(arXiv 2308.16898 §2-3) on real GloVe vectors?

For each task the tokens are the unit GloVe 6B 50-d vectors of the words, the head v is fitted
on the task's lexicon (`attsvm.text.fit_head`), and GD runs on all its sentences. Reported:

* the share of sentences where GD's selected word α_i (argmax of the final softmax) is the
  key word the sentence was written around, and where the optimal token opt_i is;
* corr(W(k), W^mm_α) over iterations and at the end, for α = GD's selection, with the
  verdict of α (global, local, or neither: `classify_selection`);
* the share of feasible Att-SVMs at opt after PCA to d ∈ `ds` (`attsvm.text` PCA) over
  random subsets of `subset_n` sentences (subsets whose opt is tied, a repeated word, are
  counted apart), for the whole task, and how often opt is still the key word at that d.

The Real words page computes the same `fit` on any sentences (`Study` → `study`, priced by
`study_price` with the experiment's formula), adding every word's numbers and a 2-D view.

The MD-Att study (arXiv 2410.14581, §2.3 of docs/followups.md for its experiments) measured
attention on the labelled sentiment word of short reviews in a trained transformer; we found
no study that compares real tokens with a solved Att-SVM.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .. import fastsvm, limits, text
from ..config import norm_for
from ..metrics import correlation
from ..problems import Problem, check_choice, check_int, check_subset, optimal_tokens
from ..svm import SvmSolution, classify_selection, solve_att_svm
from ..training import train
from ..trajectory import Trajectory
from .core import (
    NORM_OF,
    Experiment,
    Progress,
    Result,
    check_grid,
    check_settings,
    fmt,
    gd_price,
    no_progress,
    settings_dict,
)

NAME = "real-words"
TITLE = "Real words: attention picks the word that decides the label (GloVe 50-d)"
PAPER = (
    "no published experiment: the theory (arXiv 2308.16898) predicts that GD selects "
    "the optimal token, the word whose lexicon score agrees with the label, and that "
    "W(k)/‖W(k)‖ → W^mm/‖W^mm‖ where the Att-SVM is feasible"
)
NOTES = (
    "Negation is outside a one-word selection with a fixed linear head: the label "
    "depends on two words, so GD selects whichever single word scores with the label "
    '("not" in negative sentences; in positive ones a neutral word such as "find" '
    'or "we" whose fitted score is slightly positive) and fits the labels without '
    "reading the negation.",
)


@dataclass(frozen=True, kw_only=True)
class Settings:
    """tasks: bundled tasks (`attsvm.text.TASKS`); n: at most this many sentences per task
    (the first n; tasks alternate labels); query: "mean", "first" or "word:<w>"; param,
    steps, lr, record_every: GD; ds: PCA dimensions; subsets, subset_n: random subsets
    per (task, d) for the feasibility share; seed: their draw."""

    tasks: tuple = tuple(text.TASKS)
    n: int = 64
    query: str = "mean"
    param: str = "W"
    steps: int = 2000
    lr: float = 0.1
    record_every: int = 50
    ds: tuple = (2, 4, 8, 16, 32, 50)
    subsets: int = 20
    subset_n: int = 32
    seed: int = 0

    def __post_init__(self):
        check_settings(self, n=(2, 512), subsets=(0, 500), subset_n=(2, 512))
        object.__setattr__(self, "tasks", check_subset("tasks", self.tasks, tuple(text.TASKS)))
        object.__setattr__(self, "ds", check_grid("ds", self.ds, 1, 50))
        check_choice("param", self.param, ("W", "KQ"))
        if not isinstance(self.query, str) or not (
            self.query in text.QUERIES or self.query.startswith("word:")
        ):
            raise ValueError(f"`query` must be 'mean', 'first' or 'word:<w>'; got {self.query!r}")


def task_sizes(s: Settings) -> dict:
    """(n, T) of each task's problem at these settings (for the price)."""
    df = pd.read_csv(text.sentences.DATA / "tasks.csv")
    out = {}
    for name in s.tasks:
        sents = list(df[df["task"] == name]["sentence"])[: s.n]
        out[name] = (len(sents), max(len(text.tokenize(x)) for x in sents))
    return out


def _subset(p: Problem, idx) -> Problem:
    L = p.lengths[idx]
    T = int(L.max())
    return Problem(
        X=p.X[idx, :T],
        Y=p.Y[idx],
        Z=None if p.Z is None else p.Z[idx],
        v=p.v,
        lengths=L,
        query_index=p.query_index,
    )


def _opt(p: Problem):
    try:
        return optimal_tokens(p)
    except ValueError:  # a tie (a word repeated): no unique optimal token
        return None


@dataclass(frozen=True)
class Fit:
    """GD on one sentence problem and the Att-SVM of its selection (Frobenius for W, nuclear
    for K Qᵀ; arXiv 2308.16898 §2-3): what the experiment and the page both compute."""

    run: Trajectory
    alpha: np.ndarray  # (n,) GD's selected word per sentence
    opt: np.ndarray | None  # (n,) the optimal word, None on a tie
    svm: SvmSolution  # Att-SVM_α
    verdict: str  # `classify_selection` of α
    corr: np.ndarray  # (k,) corr(W(k), W^mm_α), NaN when infeasible
    norm: str  # the SVM's norm: "fro" for W, "nuc" for K Qᵀ


def fit(p: Problem, *, param: str, steps: int, lr: float, seed: int, record_every: int) -> Fit:
    """GD on `p` from the default init, then the Att-SVM of its selection."""
    norm = norm_for(param)
    tr = train(p, param=param, steps=steps, lr=lr, record_every=record_every, seed=seed)
    sol = solve_att_svm(p, tr.alpha, norm)
    c = correlation(tr.W, sol.W) if sol.feasible else np.full(len(tr.steps), np.nan)
    return Fit(
        run=tr,
        alpha=tr.alpha,
        opt=_opt(p),
        svm=sol,
        verdict=classify_selection(p, tr.alpha, norm=norm, solution=sol),
        corr=c,
        norm=norm,
    )


def at_d(sents, labels, *, query: str, head, d: int, limits_=None) -> tuple:
    """(problem after PCA to d, its opt or None on a tie, "feasible" / "infeasible" / "tie":
    the exact LDP of Att-SVM at opt on every sentence)."""
    p = text.build(sents, labels, query=query, head=head, d=d, limits=limits_).problem
    opt = _opt(p)
    status = "tie"  # a repeated word is optimal: no unique opt
    if opt is not None:
        status = "feasible" if fastsvm.solve_many([p], [opt])["feasible"][0] else "infeasible"
    return p, opt, status


def _task_row(name, p, f: Fit, key) -> dict:
    opt, alpha, tr = f.opt, f.alpha, f.run
    sol_opt = solve_att_svm(p, opt, f.norm) if opt is not None else None
    return dict(
        task=name,
        sentences=p.n,
        selected_is_key=float(np.mean(alpha == key)),
        opt_is_key=float(np.mean(opt == key)) if opt is not None else np.nan,
        selected_is_opt=float(np.mean(alpha == opt)) if opt is not None else np.nan,
        correct_sign=float(
            np.mean(np.sign((p.X[np.arange(p.n)] * tr.probs[-1][..., None]).sum(1) @ p.v) == p.Y)
        ),
        final_corr=float(f.corr[-1]),
        final_corr_opt=(
            float(correlation(tr.W[-1], sol_opt.W))
            if sol_opt is not None and sol_opt.feasible
            else np.nan
        ),
        verdict=f.verdict,
        min_selected_prob=float(tr.probs[-1].max(-1).min()),
    )


def _feasibility(name, sents, labels, s: Settings, lex, key, rng) -> list:
    """Per d: the share of feasible Att-SVMs at opt over random subsets, and the whole task's."""
    rows = []
    for d in s.ds:
        pd_, whole, status = at_d(sents, labels, query=s.query, head=lex, d=d)
        probs = []
        for _ in range(s.subsets):
            idx = np.sort(rng.choice(pd_.n, size=min(s.subset_n, pd_.n), replace=False))
            q = _subset(pd_, idx)
            if _opt(q) is not None:
                probs.append(q)
        ok = fastsvm.solve_many(probs)["feasible"] if probs else np.zeros(0, bool)
        rows.append(
            dict(
                task=name,
                d=d,
                subsets=len(probs),
                ties=s.subsets - len(probs),
                feasible_share=float(np.mean(ok)) if len(ok) else np.nan,
                whole_task=status,
                opt_is_key=(float(np.mean(whole == key)) if whole is not None else np.nan),
            )
        )
    return rows


def run(s: Settings = Settings(), *, progress: Progress = no_progress) -> Result:
    """Per task: GD and its SVM (`fit`), then the PCA feasibility sweep."""
    rng = np.random.default_rng(s.seed)
    runs, curves, feas = [], [], []
    for j, name in enumerate(s.tasks):
        progress(j / len(s.tasks), f"{name}: GD")
        sents, labels, keys = text.task(name)
        sents, labels, keys = sents[: s.n], labels[: s.n], keys[: s.n]
        lex = text.TASKS[name][1]
        tp = text.build(sents, labels, query=s.query, head=lex)
        key = text.key_positions(tp.words, keys)
        f = fit(
            tp.problem,
            param=s.param,
            steps=s.steps,
            lr=s.lr,
            seed=s.seed,
            record_every=s.record_every,
        )
        curves.append(pd.DataFrame(dict(task=name, step=f.run.steps, corr=f.corr)))
        runs.append(_task_row(name, tp.problem, f, key))
        progress((j + 0.6) / len(s.tasks), f"{name}: PCA feasibility")
        feas += _feasibility(name, sents, labels, s, lex, key, rng)
    runs_df, feas_df = pd.DataFrame(runs), pd.DataFrame(feas)
    parts = [
        f"{r.task}: GD selects the key word in {fmt(100 * r.selected_is_key, 3)} % "
        f"(opt is the key in {fmt(100 * r.opt_is_key, 3)} %), final corr(W, W^mm_α) "
        f"{fmt(r.final_corr, 4)}, α {r.verdict}"
        for r in runs_df.itertuples()
    ]
    fe = feas_df.groupby("d")["feasible_share"].mean()
    shares = ", ".join(f"d={d}: {fmt(100 * v, 3)} %" for d, v in fe.items())
    parts.append(f"feasible SVMs at opt over subsets of {s.subset_n}: {shares}")
    summary = {
        "paper": PAPER,
        "text": "; ".join(parts),
        "rows": [
            dict(task=r.task, ours_selected_is_key=r.selected_is_key, ours_final_corr=r.final_corr)
            for r in runs_df.itertuples()
        ],
    }
    frames = {
        "runs": runs_df,
        "curves": pd.concat(curves, ignore_index=True),
        "feasibility": feas_df,
    }
    return Result(name=NAME, frames=frames, summary=summary, settings=settings_dict(s), notes=NOTES)


# -- the record: what the registry, CLI, store, budget and Reproduce page read --------
def _task_price(
    what: str, *, n, T, d, param, steps, record_every, svms, ds, subsets, subset_n
) -> tuple:
    """(items, floats) of one task: GD, `svms` Att-SVMs, and per PCA dimension in `ds` the
    exact LDP of `subsets` random subsets of `subset_n` sentences and of the whole task."""
    (gd, w), floats = gd_price(
        f"{what}: GD", n=n, T=T, d=d, steps=steps, runs=1, param=param, record_every=record_every
    )
    items = [
        (gd, w),
        (
            f"{what}: {svms} Att-SVM{'s' * (svms > 1)}",
            limits.svm_work(n=n, T=T, d=d, norm=NORM_OF[param], solves=svms),
        ),
    ]
    for k in ds:
        m = min(subset_n, n)
        items.append(
            (
                f"{what}: {subsets} subset SVMs at d={k}",
                limits.bulk_svm_work(n=m, T=T, d=k, solves=subsets)
                + limits.bulk_svm_work(n=n, T=T, d=k),
            )
        )
    return items, floats


def price(s: Settings) -> tuple:
    """(items, floats, sizes) of a run with `s` (`budget.Price`), from `run`'s loop sizes."""
    items, floats, big = [], 0, (1, 1)
    for name, (n, T) in task_sizes(s).items():
        big = max(big, (n, T))
        more, f = _task_price(
            name,
            n=n,
            T=T,
            d=50,
            param=s.param,
            steps=s.steps,
            record_every=s.record_every,
            svms=2,
            ds=s.ds,
            subsets=s.subsets,
            subset_n=s.subset_n,
        )
        items += more
        floats = max(floats, f)
    solves = len(s.tasks) * (2 + len(s.ds) * (s.subsets + 1))
    return items, floats, dict(n=big[0], T=big[1], d=50, steps=s.steps, runs=1, solves=solves)


# -- the Real words page: the same fit on any sentences, with every word's numbers ----------
PCA_DS = (2, 4, 8, 16, 32, 50)  # the page's PCA dimensions
RECORDS = 100  # the page's run keeps about this many records


@dataclass(frozen=True, kw_only=True)
class Study:
    """The Real words page's settings (hashable: the app's cache key). sentences, labels
    (±1), keys (optional key word per sentence): `attsvm.text.build`'s input; query, head
    (a lexicon name), d (PCA dimension, 50: none); param, steps, lr, seed: GD."""

    sentences: tuple
    labels: tuple
    keys: tuple | None = None
    query: str = "mean"
    head: str = "sentiment"
    d: int = 50
    param: str = "W"
    steps: int = 2000
    lr: float = 0.1
    seed: int = 0

    def __post_init__(self):
        check_settings(self)
        check_int("d", self.d, 1, 50)
        check_choice("param", self.param, ("W", "KQ"))
        if self.keys is not None and len(self.keys) != len(self.sentences):
            raise ValueError(
                f"`keys` must have one word per sentence ({len(self.sentences)}); "
                f"got {len(self.keys)}"
            )

    @property
    def record_every(self) -> int:
        """About `RECORDS` records: the largest divisor of steps up to steps // RECORDS."""
        every = max(1, self.steps // RECORDS)
        while self.steps % every:
            every -= 1
        return every

    def build(self, limits_=None) -> text.TextProblem:
        return text.build(
            list(self.sentences),
            list(self.labels),
            query=self.query,
            head=self.head,
            d=self.d,
            limits=limits_,
        )


@dataclass(frozen=True)
class WordsStudy:
    """What the page shows: tp (TextProblem), fit (`Fit`: run, alpha, opt, svm, verdict,
    corr), words (DataFrame: sentence, position, word, label, final weight, score γ,
    margin, support, selected, optimal, key), plane (2-D coordinates of the distinct
    words), feasibility (per d in `PCA_DS`: status at opt, feasible, same_opt: how often
    opt is each sentence's best word at full d)."""

    tp: text.TextProblem
    fit: Fit
    words: pd.DataFrame
    plane: pd.DataFrame
    feasibility: pd.DataFrame


def study(s: Study, *, limits_=None) -> WordsStudy:
    """GD and its SVM on the page's sentences (`fit`, as the experiment's run), every word's
    weight, score and margin, the `plane` view and the feasibility after PCA (`at_d`)."""
    tp = s.build(limits_)
    p = tp.problem
    f = fit(p, param=s.param, steps=s.steps, lr=s.lr, seed=s.seed, record_every=s.record_every)
    return WordsStudy(
        tp=tp,
        fit=f,
        words=_words(tp, f, s.keys),
        plane=plane(tp, f.svm, f.alpha),
        feasibility=_feasibility_by_d(s, limits_),
    )


def _words(tp, f: Fit, keys) -> pd.DataFrame:
    p, sol = tp.problem, f.svm
    g = p.Y[:, None] * (p.X @ p.v)  # (n, T) γ
    key = text.key_positions(tp.words, list(keys)) if keys is not None else np.full(p.n, -1)
    rows = []
    for i, ws in enumerate(tp.words):
        for t, w in enumerate(ws):
            rows.append(
                dict(
                    sentence=i,
                    position=t,
                    word=w,
                    label=int(p.Y[i]),
                    weight=float(f.run.probs[-1, i, t]),
                    score=float(g[i, t]),
                    margin=(float(sol.margins[i, t]) if sol.feasible else np.nan),
                    support=bool(sol.support[i, t]) if sol.feasible else False,
                    selected=bool(f.alpha[i] == t),
                    optimal=bool(f.opt is not None and f.opt[i] == t),
                    key=bool(key[i] == t),
                )
            )
    return pd.DataFrame(rows)


def _feasibility_by_d(s: Study, limits_=None) -> pd.DataFrame:
    sents, labels = list(s.sentences), list(s.labels)
    _, full, _ = at_d(sents, labels, query=s.query, head=s.head, d=50, limits_=limits_)
    rows = []
    for d in PCA_DS:
        _, opt, status = at_d(sents, labels, query=s.query, head=s.head, d=d, limits_=limits_)
        rows.append(
            dict(
                d=d,
                status=status,
                feasible=status == "feasible",
                same_opt=(
                    float(np.mean(opt == full)) if opt is not None and full is not None else np.nan
                ),
            )
        )
    return pd.DataFrame(rows)


def plane(tp, sol, alpha) -> pd.DataFrame:
    """Distinct words in 2-D: x along the SVM's direction u = W^mm z̄ (z̄ the mean query; the
    logit of word x is about xᵀu), y along the words' top principal direction ⟂ u (raw
    PCA when the SVM is infeasible)."""
    p = tp.problem
    Q = p.query_view()[0][:, 0, :]  # (n, d)
    words: dict = {}
    for i, ws in enumerate(tp.words):
        for t, w in enumerate(ws):
            prev = words.get(w)
            words[w] = (p.X[i, t], alpha[i] == t or (prev[1] if prev else False))
    names = list(words)
    V = np.stack([words[w][0] for w in names])  # (k, d)
    if sol.feasible and np.linalg.norm(sol.W @ Q.mean(0)) > 0:
        u = sol.W @ Q.mean(0)
        u = u / np.linalg.norm(u)
        R = V - np.outer(V @ u, u)
        y = np.linalg.svd(R - R.mean(0), full_matrices=False)[2][0]
        x_name = "along W^mm z̄ (the SVM's direction)"
    else:
        _, _, Vt = np.linalg.svd(V - V.mean(0), full_matrices=False)
        u, y = Vt[0], Vt[1] if len(Vt) > 1 else Vt[0]
        x_name = "first principal direction (SVM infeasible)"
    return pd.DataFrame(
        dict(word=names, x=V @ u, y=V @ y, selected=[bool(words[w][1]) for w in names], axis=x_name)
    )


def study_price(s: Study, n: int, T: int) -> tuple:
    """(items, floats) of `study` on n sentences of at most T words: `_task_price` of one
    task at the page's d, one Att-SVM, and the whole set's LDP per PCA dimension."""
    return _task_price(
        "the sentences",
        n=n,
        T=T,
        d=s.d,
        param=s.param,
        steps=s.steps,
        record_every=s.record_every,
        svms=1,
        ds=PCA_DS,
        subsets=0,
        subset_n=n,
    )


RECORD = Experiment(
    name=NAME,
    title=TITLE,
    paper=PAPER,
    Settings=Settings,
    run=run,
    price=price,
    chart="attsvm_charts.experiments:real_words",
    tiny=dict(
        tasks=("polar", "topic"),
        n=10,
        steps=200,
        record_every=50,
        ds=(4, 50),
        subsets=3,
        subset_n=6,
    ),
    notes=NOTES,
    followup=True,
)
