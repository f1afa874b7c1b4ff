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

from threadpoolctl import threadpool_limits

from ..training import backend as _backend
from . import (
    adaptive_steps,
    budget,
    geometry,
    joint_training,
    local_convergence,
    lp_mirror_descent,
    multi_token,
    ntp,
    overparameterization,
    rank_staircase,
    real_words,
    regularization_path,
    sequence_causal,
    svm_hierarchy,
    svm_rank,
    weight_decay,
)
from .core import CLUSTER, Progress, Result, no_progress

_MODULES = {
    "geometry-1": geometry,
    "geometry-2": geometry,
    local_convergence.NAME: local_convergence,
    multi_token.NAME: multi_token,
    svm_rank.NAME: svm_rank,
    overparameterization.NAME: overparameterization,
    regularization_path.NAME: regularization_path,
    sequence_causal.NAME: sequence_causal,
}
EXPERIMENTS = tuple(_MODULES)
# Follow-up papers (next-token prediction, arXiv 2403.08081; optimizers, arXiv 2410.14581 and
# 2402.05738): not part of the paper's list or `reproduce all`; run by name or together
# (`reproduce followups`), and on the Reproduce page's "Follow-up papers" section.
_OPTIM = {lp_mirror_descent.NAME: lp_mirror_descent, adaptive_steps.NAME: adaptive_steps,
          joint_training.NAME: joint_training}
_MODULES.update(ntp.MODULES)
_MODULES.update(_OPTIM)
# Rank from small init and weight decay on (K, Q) (arXiv 2306.07042, 2410.23819).
_RANK = {rank_staircase.NAME: rank_staircase, weight_decay.NAME: weight_decay}
_MODULES.update(_RANK)
_TEXT = {real_words.NAME: real_words}     # real word vectors (attsvm.text)
_MODULES.update(_TEXT)
_HIER = {svm_hierarchy.NAME: svm_hierarchy}   # several layers and heads (open; attsvm.stack)
_MODULES.update(_HIER)
FOLLOWUPS = (tuple(ntp.MODULES) + tuple(_OPTIM) + tuple(_RANK) + tuple(_TEXT)
             + tuple(_HIER))


def _module(name: str):
    if name not in _MODULES:
        raise ValueError(f"`name` must be one of {list(EXPERIMENTS)}; got {name!r}")
    return _MODULES[name]


def title(name: str) -> str:
    """A one-line title of the experiment."""
    return _module(name).TITLE


def paper_statistic(name: str) -> str:
    """The paper's reference statistic for the experiment, as text."""
    m = _module(name)
    return m.PAPER[name] if isinstance(m.PAPER, dict) else m.PAPER


def notes(name: str) -> tuple:
    """Where the authors' code differs from attsvm, for this experiment."""
    return getattr(_module(name), "NOTES", ())


def uses_helpers(name: str) -> bool:
    """Whether the experiment shares enough Python-bound work with helper processes
    (`core.ordered_map`) to pay for starting them (`HELPED` in its module: svm-rank,
    over-parameterization); the CLI starts them only then."""
    return bool(getattr(_module(name), "HELPED", False))


def settings(name: str, **overrides):
    """The experiment's Settings: the paper's defaults, with `overrides` (validated)."""
    m = _module(name)
    if m is geometry:
        overrides.setdefault("preset", name)
        if overrides["preset"] != name:
            raise ValueError(
                f"`preset` must be {name!r} for experiment {name!r}; got {overrides['preset']!r}"
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
    m = _module(name)
    s = settings_ if settings_ is not None else settings(name, **overrides)
    budget.check(name, s)       # priced as a whole, refused before any work starts
    remote = CLUSTER.get()
    tally = Counter(remote.workers) if remote is not None else None
    t0 = time.perf_counter()
    # One BLAS thread per call: every matrix here is small (d ≤ a few dozen), where BLAS
    # threads only add synchronization (measured: the regularization path 2.6 s single-
    # threaded vs 11-23 s with OpenBLAS threads on a busy 2-core machine). Parallelism comes
    # from JAX devices and from fastsvm's own threads instead.
    with threadpool_limits(limits=1, user_api="blas"):
        res = m.run(s, progress=progress)
    progress(1.0, "done")
    where = _backend()
    if remote is not None:      # which workers computed it (attsvm.cluster)
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
    _module(name)
    return budget.price(name, settings_ if settings_ is not None else settings(name, **overrides))


def check(name: str, settings_=None, **overrides) -> budget.Price:
    """`price`, refused (BudgetError naming what to lower) over the active mode's budget."""
    _module(name)
    return budget.check(name, settings_ if settings_ is not None else settings(name, **overrides))


__all__ = ["EXPERIMENTS", "Result", "run", "settings", "title", "paper_statistic", "notes",
           "uses_helpers",
           "price", "check"]


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
