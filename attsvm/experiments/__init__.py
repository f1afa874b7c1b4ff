"""Every experiment of the paper, reproduced (docs/theory.md §4), as functions that return tidy
pandas DataFrames and the statistic the paper reports next to ours.

    result = attsvm.experiments.run("local-convergence", runs=20)   # Settings overrides
    result.frames["curves"], result.summary["text"]

`EXPERIMENTS` lists them; `settings(name, **overrides)` builds (and validates) the settings.
Defaults are the paper's settings. Nothing here imports a UI library; the charts live in
attsvm_charts/experiments.py.
"""

from __future__ import annotations

import time
from collections import Counter

from .. import blas
from ..training import backend as _backend
from . import budget
from .core import CLUSTER, Experiment, Progress, Result, no_progress
from .registry import EXPERIMENTS, FOLLOWUPS, REGISTRY, record


def title(name: str) -> str:
    """A one-line title of the experiment."""
    return record(name).title


def paper_statistic(name: str) -> str:
    """The paper's reference statistic for the experiment, as text."""
    return record(name).paper


def notes(name: str) -> tuple:
    """Where the authors' code differs from attsvm, for this experiment."""
    return record(name).notes


def uses_helpers(name: str) -> bool:
    """Whether the experiment shares enough Python-bound work with helper processes
    (`core.ordered_map`) to pay for starting them (its record's `helped`: svm-rank,
    over-parameterization); the CLI starts them only then."""
    return record(name).helped


def settings(name: str, **overrides):
    """The experiment's Settings: the paper's defaults, with `overrides` (validated)."""
    m = record(name)
    for key, value in m.fixed.items():
        overrides.setdefault(key, value)
        if overrides[key] != value:
            raise ValueError(
                f"`{key}` must be {value!r} for experiment {name!r}; got {overrides[key]!r}"
            )
    fields = set(m.Settings.__dataclass_fields__)
    bad = sorted(set(overrides) - fields)
    if bad:
        raise ValueError(
            f"`{bad[0]}` must be one of the settings of {name!r} {sorted(fields)}; "
            f"got {bad[0]}={overrides[bad[0]]!r}"
        )
    return m.Settings(**overrides)


def run(name: str, settings_=None, *, progress: Progress = no_progress, **overrides) -> Result:
    """Run experiment `name` with `settings_` (or the defaults with `overrides`); on the
    cluster in use (`attsvm.cluster.use`), if any, whose workers `Result.backend["cluster"]`
    then names."""
    m = record(name)
    s = settings_ if settings_ is not None else settings(name, **overrides)
    budget.check(name, s)  # priced as a whole, refused before any work starts
    remote = CLUSTER.get()
    tally = Counter(remote.workers) if remote is not None else None
    t0 = time.perf_counter()
    with blas.one_thread():
        res = m.run(s, progress=progress)
    progress(1.0, "done")
    where = _backend()
    if remote is not None:  # which workers computed it (attsvm.cluster)
        where["cluster"] = remote.record(since=tally)
    return Result(
        name=name,
        frames=res.frames,
        summary=res.summary,
        settings=res.settings,
        notes=res.notes,
        seconds=time.perf_counter() - t0,
        backend=where,
    )


def price(name: str, settings_=None, **overrides) -> budget.Price:
    """What running `name` with these settings costs (work units, seconds, memory)."""
    record(name)
    return budget.price(name, settings_ if settings_ is not None else settings(name, **overrides))


def check(name: str, settings_=None, **overrides) -> budget.Price:
    """`price`, refused (BudgetError naming what to lower) over the active mode's budget."""
    record(name)
    return budget.check(name, settings_ if settings_ is not None else settings(name, **overrides))


__all__ = [
    "EXPERIMENTS",
    "FOLLOWUPS",
    "REGISTRY",
    "Experiment",
    "Result",
    "record",
    "run",
    "settings",
    "title",
    "paper_statistic",
    "notes",
    "uses_helpers",
    "price",
    "check",
]


def metadata(res: Result) -> dict:
    """What settings.json records about a result (the CLI's file and the app's download):
    the experiment, its title, the attsvm version, settings, time, backend, summary, notes."""
    from .. import __version__

    return dict(
        experiment=res.name,
        attsvm_version=__version__,
        settings=res.settings,
        seconds=res.seconds,
        backend=res.backend,
        summary=res.summary,
        notes=list(res.notes),
        title=title(res.name),
    )
