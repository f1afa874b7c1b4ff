"""Live gradient descent: one run advanced in short chunks, its records appended.

A live run is a plain dict (a session can hold it): the records so far, the parameters to
continue from (`Trajectory.final_params`, so continuing is exact) and where it stands.
Every chunk is the same compiled program (`CHUNK_RECORDS` records of `every` steps), so
stepping, playing and running to the end give bit-identical records.
"""

from __future__ import annotations

import numpy as np

from . import limits
from .config import CHUNK_RECORDS, ProblemSpec, TrainSpec, record_every
from .problems import Problem
from .training import default_init, train
from .trajectory import Trajectory

AUTO_RUN_WORK = 1e8  # work units (≈ 0.1 s): cheaper runs may be computed in one go


def live_work(prob: Problem, tspec: TrainSpec) -> float:
    """The whole run's price in work units (`limits.gd_work`, the one GD cost formula)."""
    return limits.gd_work(
        n=prob.n,
        T=prob.T,
        d=prob.d,
        steps=tspec.steps,
        queries=prob.queries,
        param=tspec.param,
        m=tspec.m_for(prob),
    )


def live_every(steps: int) -> int:
    """Record interval: ≤ 200 records, a whole number of live chunks when possible."""
    lo = max(1, -(-steps // 200))
    for r in range(lo, steps + 1):
        if steps % r == 0 and (steps // r) % CHUNK_RECORDS == 0:
            return r
    return record_every(steps)


def initial_params(prob: Problem, tspec: TrainSpec):
    init = tspec.init_for(prob)
    if init is None:  # the library's default draw for run index 0 (what train() uses)
        init = default_init(prob, tspec.param, seed=tspec.init_seed, m=tspec.m_for(prob))
    return init


def new_run(pspec: ProblemSpec, tspec: TrainSpec) -> dict:
    prob = pspec.build()
    return dict(
        key=(pspec, tspec),
        every=live_every(tspec.steps),
        total=tspec.steps,
        W=None,
        probs=None,
        loss=None,
        grad_norm=None,
        steps=None,
        final=initial_params(prob, tspec),
        done=False,
        overflow=-1,
    )


def advance(prob: Problem, tspec: TrainSpec, init, records: int, every: int) -> Trajectory:
    """`records`·`every` more GD steps from `init` (None: the spec's initialization)."""
    init = tspec.init_for(prob) if init is None else init
    return train(
        prob, steps=records * every, init=init, record_every=every, **tspec.train_kwargs(prob)
    )


def step_run(run: dict, prob: Problem, tspec: TrainSpec, records: int, *, advance=advance) -> dict:
    """Advance `run` in place by up to `records` records; returns it. `advance` computes
    one chunk (the app passes a metered version of `attsvm.live.advance`)."""
    if run["done"]:
        return run
    every = run["every"]
    at = 0 if run["steps"] is None else int(run["steps"][-1])
    left = (run["total"] - at) // every
    k = min(records, left)
    if run["steps"] is not None and k <= 0:
        run["done"] = True
        return run
    # Always the full chunk shape (one compiled program); extra records are dropped.
    traj = advance(prob, tspec, run["final"], CHUNK_RECORDS, every)
    sl = slice(0, k + 1) if run["steps"] is None else slice(1, k + 1)
    new = dict(
        W=traj.W[sl],
        probs=traj.probs[sl],
        loss=traj.loss[sl],
        grad_norm=traj.grad_norm[sl],
        steps=at + traj.steps[sl],
    )
    for name, arr in new.items():
        run[name] = arr if run[name] is None else np.concatenate([run[name], arr])
    if k < CHUNK_RECORDS:
        # The chunk ran past the end: continue from the last kept record instead.
        run["final"] = _params_at(traj, k, tspec)
    else:
        run["final"] = traj.final_params
    if int(traj.overflow_at) >= 0 and int(traj.overflow_at) <= k * every:
        run["overflow"] = at + int(traj.overflow_at)
        run["done"] = True
    if int(run["steps"][-1]) >= run["total"]:
        run["done"] = True
    return run


def _params_at(traj, k, tspec):
    # Only the last record's parameters are exact for K, Q; a short tail chunk only
    # happens at the very end of a run, where nothing continues from it.
    if tspec.param == "W":
        return traj.W[k]
    return traj.final_params


def reset(pspec: ProblemSpec, tspec: TrainSpec, prob: Problem, *, advance=advance) -> dict:
    """The run at iteration 0 (one record)."""
    run = new_run(pspec, tspec)
    first = dict(run)
    step_run(first, prob, tspec, 1, advance=advance)
    for name in ("W", "probs", "loss", "grad_norm", "steps"):
        run[name] = first[name][:1]
    return run


def run_to_end(pspec: ProblemSpec, tspec: TrainSpec) -> dict:
    """The whole run, built from the same chunks as live play (so stepping and this agree
    to the last bit)."""
    prob = pspec.build()
    run = new_run(pspec, tspec)
    while not run["done"]:
        step_run(run, prob, tspec, CHUNK_RECORDS)
    return run


def copy_run(run: dict) -> dict:
    """A copy a session can extend or truncate without touching a cached run."""
    return {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in run.items()}


def as_trajectory(run: dict) -> Trajectory:
    """The recorded part of a live run as a `Trajectory` (for saturated_at etc.)."""
    return Trajectory.from_records(
        W=run["W"],
        probs=run["probs"],
        loss=run["loss"],
        grad_norm=run["grad_norm"],
        steps=run["steps"],
        overflow_at=run["overflow"],
    )
