"""Work budgets: how much one user action may ask for.

The cost of a GD action is measured in token-feature-steps,

    work = runs · steps · n · K · T · d        (K = 1, or T for sequence/causal problems)

which is proportional to the floating-point work of the forward and backward passes; an
SVM sweep costs `solves · (n·T·d²)` on the same scale. Two modes:

- "local" (default): generous caps for a researcher's own machine;
- "hosted" (`ATTSVM_MODE=hosted`): caps sized so that one visitor's action finishes in a few
  seconds on a 2-core server and cannot starve the others.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

MODES = ("local", "hosted")


@dataclass(frozen=True, kw_only=True)
class Limits:
    """Caps of one mode. `max_work` bounds `work` (see module doc) for a single action."""

    mode: str
    max_work: float
    max_runs: int
    max_steps: int
    max_n: int
    max_T: int
    max_d: int
    max_svm_solves: int
    session_seconds: float      # wall-clock allowance of one action before it is cancelled


LIMITS = {
    "local": Limits(mode="local", max_work=2e11, max_runs=5000, max_steps=200_000, max_n=256,
                    max_T=128, max_d=256, max_svm_solves=20_000, session_seconds=3600.0),
    "hosted": Limits(mode="hosted", max_work=2e9, max_runs=500, max_steps=20_000, max_n=32,
                     max_T=32, max_d=64, max_svm_solves=2000, session_seconds=60.0),
}


def mode() -> str:
    """The active mode: ATTSVM_MODE (default "local")."""
    m = os.environ.get("ATTSVM_MODE", "local").strip().lower()
    return m if m in MODES else "local"


def current() -> Limits:
    return LIMITS[mode()]


def gd_work(*, n: int, T: int, d: int, steps: int, runs: int = 1, queries: str = "single") -> float:
    K = 1 if queries == "single" else T
    return float(runs) * steps * n * K * T * d


def check_gd(*, n: int, T: int, d: int, steps: int, runs: int = 1, queries: str = "single",
             limits: Limits | None = None) -> None:
    """Raise ValueError (naming the setting and the largest allowed value) if a GD action is
    over the active mode's budget."""
    L = limits or current()
    for name, value, cap in (("n", n, L.max_n), ("T", T, L.max_T), ("d", d, L.max_d),
                             ("steps", steps, L.max_steps), ("runs", runs, L.max_runs)):
        if value > cap:
            raise ValueError(f"`{name}` must be at most {cap} in {L.mode} mode; got {value}")
    w = gd_work(n=n, T=T, d=d, steps=steps, runs=runs, queries=queries)
    if w > L.max_work:
        per_step = w / steps
        most_steps = int(L.max_work // per_step)
        per_run = w / runs
        most_runs = int(L.max_work // per_run)
        raise ValueError(
            f"this action's work (runs·steps·n·T·d = {w:.3g}) must be at most {L.max_work:.3g} "
            f"in {L.mode} mode; at this size use at most {most_steps:,} steps"
            + (f" or at most {most_runs:,} runs" if runs > 1 else ""))


def check_svm(*, solves: int, limits: Limits | None = None) -> None:
    L = limits or current()
    if solves > L.max_svm_solves:
        raise ValueError(f"`solves` must be at most {L.max_svm_solves} SVM solves in {L.mode} "
                         f"mode; got {solves}")
