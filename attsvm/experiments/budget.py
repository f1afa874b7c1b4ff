"""What an experiment's settings will cost, priced as a whole before it starts.

Each experiment prices itself beside its `run` (its record's `price`, from the same loop
sizes), with `attsvm.limits`' formulas (work units ≈ ns on the reference 2-core machine):
its gradient-descent runs (`gd_work`, through `core.gd_price`), its SVM solves by cvxpy +
Clarabel (`svm_work`) or by the sweeps' exact solvers (`bulk_svm_work`), the regularization
path's sphere minimizations (`sphere_work`), and the float64 numbers a gradient-descent call
records at once (`record_floats`). `check` refuses settings over the
active mode's caps and names, for each setting that can be lowered, the largest value that
fits with the others unchanged.

    budget.check("local-convergence", experiments.settings("local-convergence", runs=500))
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from types import SimpleNamespace

from .. import limits
from .registry import record


@dataclass(frozen=True)
class Price:
    """The cost of one experiment run.

    Attributes:
        items: (what, work units) for each piece of work.
        floats: the most float64 numbers one gradient-descent call records at once.
        sizes: the largest n, T, d, steps, runs and solves asked for (the modes' hard caps).
    """

    items: tuple
    floats: int
    sizes: dict

    @property
    def work(self) -> float:
        return float(sum(w for _, w in self.items))

    @property
    def seconds(self) -> float:
        return limits.seconds(self.work)


# Settings a visitor can lower to make a run cheaper (ints, and grids of ints).
LOWERABLE = (
    "runs",
    "steps",
    "n",
    "T",
    "d",
    "ds",
    "max_draws",
    "max_seeds",
    "radii",
    "restarts",
    "instances",
    "sentences",
    "layers",
    "heads",
)


def price(name: str, s) -> Price:
    """The cost of running experiment `name` with settings `s` (no validation: any object
    with the settings' attributes): its record's `price` (`core.Experiment`)."""
    items, floats, sizes = record(name).price(s)
    return Price(items=tuple(items), floats=int(floats), sizes=sizes)


def _fits(name, s, L) -> bool:
    p = price(name, s)
    caps = dict(
        n=L.max_n, T=L.max_T, d=L.max_d, steps=L.max_steps, runs=L.max_runs, solves=L.max_svm_solves
    )
    return (
        p.work <= L.max_work
        and p.floats <= L.max_record_floats
        and all(v <= caps[k] for k, v in p.sizes.items() if k in caps)
    )


def _largest(name, s, field, L):
    """The largest value of `field` (an int, or the top of a grid of ints) that fits with the
    other settings unchanged, or None."""
    value = getattr(s, field)
    grid = isinstance(value, tuple)
    top = max(value) if grid else value
    if not isinstance(top, int) or isinstance(top, bool) or top < 1:
        return None

    def at(x):
        v = tuple(g for g in value if g <= x) if grid else x
        return SimpleNamespace(**{**_fields(s), field: v}) if v != () else None

    lo, hi = (0 if field == "restarts" else 1), top - 1
    if hi < lo or at(lo) is None or not _fits(name, at(lo), L):
        return None
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if _fits(name, at(mid), L) else (lo, mid - 1)
    try:  # a hint must be a value the experiment accepts (e.g. T ≥ 2)
        dataclasses.replace(s, **{field: getattr(at(lo), field)})
    except ValueError:
        return None
    return lo


def _fields(s) -> dict:
    return {f.name: getattr(s, f.name) for f in dataclasses.fields(s)}


def check(name: str, s, *, limits_: limits.Limits | None = None) -> Price:
    """Refuse settings over the active mode's caps; return their price.

    Raises:
        BudgetError naming the cap that is passed and, for each setting that can be lowered
        alone to fit (runs, steps, n, T, d, the grid ds, …), the largest value that fits.
    """
    L = limits_ or limits.current()
    p = price(name, s)
    if _fits(name, s, L):
        return p
    caps = dict(
        n=L.max_n, T=L.max_T, d=L.max_d, steps=L.max_steps, runs=L.max_runs, solves=L.max_svm_solves
    )
    over = [
        f"{k} = {v:,} (at most {caps[k]:,})"
        for k, v in p.sizes.items()
        if k in caps and v > caps[k]
    ]
    if p.work > L.max_work:
        over.append(f"≈ {p.seconds:.3g} s of compute (at most {limits.seconds(L.max_work):.3g} s)")
    if p.floats > L.max_record_floats:
        over.append(f"{p.floats:,} recorded numbers (at most {L.max_record_floats:,})")
    hints = []
    for field in LOWERABLE:
        if hasattr(s, field):
            best = _largest(name, s, field, L)
            if best is not None:
                hints.append(f"`{field}` ≤ {best:,}" if field != "ds" else f"`ds` up to {best:,}")
    if not hints:
        default = type(s)(**({"preset": s.preset} if hasattr(s, "preset") else {}))
        hints_text = ". No single setting fits when lowered alone: ask for less of several"
        if _fits(name, default, L):
            hints_text += f" (the paper's settings fit, at ≈ {price(name, default).seconds:.2g} s)"
    else:
        hints_text = f". Lower one setting: {', or '.join(hints)}"
    raise limits.BudgetError(
        f"{name} with these settings asks for {'; '.join(over)} per action in {L.mode} mode"
        + hints_text
    )
