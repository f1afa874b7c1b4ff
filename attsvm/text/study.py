"""What the Real words page computes, as one plain function of its settings: GD on a sentence
problem, the Att-SVM of GD's selection (Frobenius for W, nuclear for K Qᵀ; arXiv 2308.16898
§2-3), every word's weight, score and SVM margin, a 2-D view along the SVM's direction, and
the SVM's feasibility after PCA to smaller d.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .. import fastsvm
from ..config import norm_for
from ..metrics import correlation
from ..problems import optimal_tokens
from ..svm import classify_selection, solve_att_svm
from ..training import train
from .sentences import build, key_positions

PCA_DS = (2, 4, 8, 16, 32, 50)
RECORDS = 100


def _opt(p):
    try:
        return optimal_tokens(p)
    except ValueError:
        return None


def feasibility_by_d(sentences, labels, *, query, head, ds=PCA_DS, limits=None) -> pd.DataFrame:
    """Per d: whether Att-SVM at opt is feasible after PCA to d (exact LDP), and how often
    opt is each sentence's best word at full d (`same_opt`)."""
    full = _opt(build(sentences, labels, query=query, head=head, limits=limits).problem)
    rows = []
    for d in ds:
        p = build(sentences, labels, query=query, head=head, d=d, limits=limits).problem
        opt = _opt(p)
        status = "tie" if opt is None else (
            "feasible" if fastsvm.solve_many([p], [opt])["feasible"][0] else "infeasible")
        rows.append(dict(d=d, status=status, feasible=status == "feasible",
                         same_opt=(float(np.mean(opt == full)) if opt is not None
                                   and full is not None else np.nan)))
    return pd.DataFrame(rows)


def words_study(sentences, labels, *, keys=None, query: str = "mean", head="sentiment",
                d: int | None = None, param: str = "W", steps: int = 2000, lr: float = 0.1,
                seed: int = 0, limits=None) -> dict:
    """GD and its SVM on sentences (`attsvm.text.build` arguments; `keys`: optional key
    word per sentence). Returns a dict: tp (TextProblem), run (Trajectory, ~100 records),
    alpha, opt (or None on a tie), svm (SvmSolution of α), verdict, corr (per record),
    words (DataFrame: sentence, position, word, weight per record, score, margin, support,
    selected, optimal, key), plane (2-D coordinates of the distinct words), feasibility."""
    tp = build(sentences, labels, query=query, head=head, d=d, limits=limits)
    p = tp.problem
    every = max(1, steps // RECORDS)
    while steps % every:
        every -= 1
    run = train(p, param=param, steps=steps, lr=lr, seed=seed, record_every=every)
    norm = norm_for(param)
    alpha, opt = run.alpha, _opt(p)
    sol = solve_att_svm(p, alpha, norm)
    verdict = classify_selection(p, alpha, norm=norm, solution=sol)
    corr = correlation(run.W, sol.W) if sol.feasible else np.full(len(run.steps), np.nan)
    g = p.Y[:, None] * (p.X @ p.v)                                        # (n, T) γ
    key = key_positions(tp.words, keys) if keys is not None else np.full(p.n, -1)
    rows = []
    for i, ws in enumerate(tp.words):
        for t, w in enumerate(ws):
            rows.append(dict(sentence=i, position=t, word=w, label=int(p.Y[i]),
                             weight=float(run.probs[-1, i, t]), score=float(g[i, t]),
                             margin=(float(sol.margins[i, t]) if sol.feasible else np.nan),
                             support=bool(sol.support[i, t]) if sol.feasible else False,
                             selected=bool(alpha[i] == t),
                             optimal=bool(opt is not None and opt[i] == t),
                             key=bool(key[i] == t)))
    words = pd.DataFrame(rows)
    weights = run.probs[:, :, :]                                          # (k, n, T)
    return dict(tp=tp, run=run, alpha=alpha, opt=opt, svm=sol, verdict=verdict, corr=corr,
                words=words, weights=weights, plane=plane(tp, sol, alpha),
                feasibility=feasibility_by_d(sentences, labels, query=query, head=head,
                                             limits=limits))


def plane(tp, sol, alpha) -> pd.DataFrame:
    """Distinct words in 2-D: x along the SVM's direction u = W^mm z̄ (z̄ the mean query; the
    logit of word x is about xᵀu), y along the words' top principal direction ⟂ u (raw
    PCA when the SVM is infeasible)."""
    p = tp.problem
    Q = p.query_view()[0][:, 0, :]                                       # (n, d)
    flat = [(w, p.X[i, t], alpha[i] == t) for i, ws in enumerate(tp.words)
            for t, w in enumerate(ws)]
    words = {}
    for w, x, sel in flat:
        prev = words.get(w)
        words[w] = (x, sel or (prev[1] if prev else False))
    names = list(words)
    V = np.stack([words[w][0] for w in names])                           # (k, d)
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
    return pd.DataFrame(dict(word=names, x=V @ u, y=V @ y,
                             selected=[bool(words[w][1]) for w in names], axis=x_name))


def study_work(*, n: int, T: int, d: int, param: str, steps: int) -> float:
    """The page's price in work units (`attsvm.limits`): GD, the Att-SVM of its selection
    (Frobenius for W, nuclear for K Qᵀ) and the exact LDP per PCA dimension."""
    from .. import limits
    w = limits.gd_work(n=n, T=T, d=d, steps=steps, param=param)
    w += limits.svm_work(n=n, T=T, d=d, norm=norm_for(param))
    w += sum(limits.bulk_svm_work(n=n, T=T, d=k) for k in PCA_DS)
    return w
