"""Prices of the optimizer experiments (issue 11), in `attsvm.experiments.budget`'s convention
(on main): `PRICES[name](s) -> (items, floats, sizes)`, items = (what, work units), floats =
the most float64 numbers one batched run records at once, sizes = the largest n, T, d, steps,
runs and solves asked for. Kept apart so that it merges into budget.PRICES with one line.

The ℓp-AttSVMs are cvxpy + Clarabel power-cone programs: priced with `limits.svm_work`'s
non-Frobenius (conic) formula. The Frobenius SVMs of adaptive-steps are the sweeps' exact
solver (`limits.bulk_svm_work` where this branch's limits has it, else `svm_work`).
"""
from __future__ import annotations

from .. import limits


def _bulk(**kw) -> float:
    f = getattr(limits, "bulk_svm_work", None)
    return f(**kw) if f is not None else limits.svm_work(**kw)


def _lp_mirror_descent(s):
    B = s.runs * len(s.ps)
    gd = limits.gd_work(n=s.n, T=s.T, d=s.d, steps=s.steps, runs=B)
    solves = B * len(s.ps)          # at most: runs sharing a selection share its SVMs
    items = [(f"{B} mirror-descent runs", gd),
             (f"{solves} ℓp-AttSVMs (cvxpy)",
              limits.svm_work(n=s.n, T=s.T, d=s.d, norm="lp", solves=solves))]
    floats = limits.record_floats(n=s.n, T=s.T, d=s.d, steps=s.steps,
                                  record_every=s.record_every, runs=B)
    return items, floats, dict(n=s.n, T=s.T, d=s.d, steps=s.steps, runs=B, solves=solves)


def _adaptive_steps(s):
    items = [(f"{s.runs} {rule} runs", limits.gd_work(n=s.n, T=s.T, d=s.d, steps=s.steps,
                                                     runs=s.runs))
             for rule in ("GD", "NGD", "Polyak")]
    solves = 4 * s.runs            # feasibility at opt, then one per (rule, instance)
    items.append((f"{solves} Att-SVMs (Frobenius), bulk",
                  _bulk(n=s.n, T=s.T, d=s.d, solves=solves)))
    floats = limits.record_floats(n=s.n, T=s.T, d=s.d, steps=s.steps,
                                  record_every=s.record_every, runs=s.runs)
    return items, floats, dict(n=s.n, T=s.T, d=s.d, steps=s.steps, runs=s.runs, solves=solves)


PRICES = {
    "lp-mirror-descent": _lp_mirror_descent,
    "adaptive-steps": _adaptive_steps,
}


def work(name: str, s) -> float:
    """Total work units of experiment `name` at settings `s`."""
    items, _, _ = PRICES[name](s)
    return float(sum(w for _, w in items))


def check(name: str, s) -> None:
    """Refuse settings over the active mode's caps (sizes, summed work, recorded numbers)
    before anything runs (budget.check does this on main, with hints)."""
    items, floats, sizes = PRICES[name](s)
    L = limits.current()
    limits.check_size(**sizes)
    limits.check_work(sum(w for _, w in items), what=f"{name} with these settings")
    if floats > L.max_record_floats:
        raise limits.BudgetError(
            f"`record_every` must keep the recorded history under {L.max_record_floats:,} "
            f"numbers in {L.mode} mode; got {s.record_every} ({floats:,} numbers)")
