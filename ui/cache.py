"""Cached library calls: each a one-line `st.cache_data` wrapper over `attsvm`. Keys are
settings records (hashable dataclasses) and plain values, so sessions with the same URL
share results; every cache is bounded (`max_entries`, `ttl`).

Budgets (`attsvm.limits`) are checked by the callers *before* these run (see
`ui.widgets.check_gd`), so an oversize request never reaches a cache. Each computing body is
`hosted.metered`: on a miss it holds a compute slot and is charged to the session.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np
import streamlit as st

import attsvm
from attsvm import experiments, joint, live, ntp, stack_live, staircase, studies
from attsvm.config import ProblemSpec, TrainSpec
from attsvm.experiments import real_words
from attsvm.ntp import session as ntp_session

from . import hosted

TTL = 3600


@st.cache_data(max_entries=48, ttl=TTL, show_spinner="Running gradient descent…")
@hosted.metered
def train(pspec: ProblemSpec, tspec: TrainSpec, every: int | None = None) -> attsvm.Trajectory:
    """One GD run, recorded every `every` steps (default: ~200 records)."""
    return studies.run(pspec, tspec, every)


# Not cached: one session's live run, one chunk at a time.
advance = hosted.metered(live.advance)


@st.cache_data(max_entries=32, ttl=TTL, show_spinner="Running gradient descent…")
@hosted.metered
def live_full(pspec: ProblemSpec, tspec: TrainSpec) -> dict:
    """The playground's whole run (`attsvm.live.run_to_end`)."""
    return live.run_to_end(pspec, tspec)


def live_run(pspec: ProblemSpec, tspec: TrainSpec) -> dict:
    """The whole live run (cached), copied so the session can extend or truncate it."""
    return live.copy_run(live_full(pspec, tspec))


@st.cache_data(max_entries=512, ttl=TTL, show_spinner=False)
@hosted.metered
def svm(pspec: ProblemSpec, alpha: tuple | None, norm: str) -> attsvm.SvmSolution:
    """Att-SVM_α (norm "fro") or Att-SVM*_α ("nuc"); alpha None means α = opt."""
    return attsvm.solve_att_svm(pspec.build(), None if alpha is None else np.array(alpha), norm)


def classify(pspec: ProblemSpec, alpha: tuple, norm: str = "fro") -> str:
    """`attsvm.classify_selection` of α, with the cached SVM."""
    return attsvm.classify_selection(
        pspec.build(), np.array(alpha), norm=norm, solution=svm(pspec, alpha, norm)
    )


@st.cache_data(max_entries=16, ttl=TTL, show_spinner="Solving the SVM of every selection…")
@hosted.metered
def selections(pspec: ProblemSpec, norm: str = "fro"):
    return studies.selections(pspec, norm)


@st.cache_data(max_entries=16, ttl=TTL, show_spinner="Running GD from many initializations…")
@hosted.metered
def basins(pspec: ProblemSpec, tspec: TrainSpec, s: studies.BasinsSettings):
    return studies.basins(pspec, tspec, s)


@st.cache_data(max_entries=64, ttl=TTL, show_spinner=False)
@hosted.metered
def overparam_cell(base: ProblemSpec, tspec: TrainSpec, runs: int):
    return studies.overparam_cell(base, tspec, runs)


@st.cache_data(max_entries=64, ttl=TTL, show_spinner=False)
@hosted.metered
def rank_cell(c: studies.RankCell):
    return studies.rank_cell(c)


@st.cache_data(max_entries=16, ttl=TTL, show_spinner="Solving the generalized SVM…")
@hosted.metered
def generalized(pspec: ProblemSpec, tspec: TrainSpec, threshold: float) -> dict:
    return studies.generalized_fit(
        pspec.build(), train(pspec, tspec), threshold=threshold, norm=tspec.norm
    )


@st.cache_data(max_entries=16, ttl=TTL, show_spinner=False)
@hosted.metered
def experiment(name: str, s) -> experiments.Result:
    """Experiment `name` run with its Settings record `s` (`experiments.settings`; cached by
    both, so equal settings share a run; the progress bar is replayed)."""
    bar = st.progress(0.0, text="starting…")
    res = experiments.run(
        name, s, progress=lambda f, t: bar.progress(min(max(f, 0.0), 1.0), text=t)
    )
    bar.progress(1.0, text=f"done in {res.seconds:.1f} s")
    return res


# -- Optimizer → norm page ---------------------------------------------------------------------
@st.cache_data(max_entries=16, ttl=TTL, show_spinner="Racing the optimizers…")
@hosted.metered
def optimizer_race(pspec: ProblemSpec, s: studies.RaceSettings) -> dict:
    """`attsvm.studies.race` on the spec's problem (W_0 = 0)."""
    return studies.race(pspec.build(), s)


@st.cache_data(max_entries=512, ttl=TTL, show_spinner=False)
@hosted.metered
def svm_norm(pspec: ProblemSpec, alpha: tuple, norm: str, p: float | None = None):
    """The Att-SVM_α in any norm of `attsvm.solve_att_svm` (α nested tuples for queries)."""
    return attsvm.solve_att_svm(pspec.build(), np.array(alpha), norm, p=p)


# -- next-token prediction ----------------------------------------------------------------
@st.cache_data(max_entries=128, ttl=TTL, show_spinner=False)
@hosted.metered
def graph_svm(data: ntp_session.Sequences):
    """`attsvm.ntp.solve_graph_svm` of the page's data."""
    return ntp.solve_graph_svm(data.problem())


class SharedRuns:
    """Finished live runs shared by every session (a live run streams its chunks, so it
    cannot be an `st.cache_data` body): at most `size`, the oldest dropped first."""

    def __init__(self, size: int):
        self.size, self._lock, self._items = size, threading.Lock(), OrderedDict()

    def get(self, key):
        with self._lock:
            return self._items.get(key)

    def put(self, key, value) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)


@st.cache_resource(show_spinner=False)
def ntp_runs() -> SharedRuns:
    """The next-token page's finished runs, by their settings (one store per server)."""
    return SharedRuns(16)


# -- Train the head too ------------------------------------------------------------------------
@st.cache_data(max_entries=32, ttl=TTL, show_spinner="Training v and W together…")
@hosted.metered
def joint_preset(s: joint.PresetSettings) -> dict:
    """`attsvm.joint.preset_study` of a joint-training preset."""
    return joint.preset_study(s)


@st.cache_data(max_entries=16, ttl=TTL, show_spinner="Training v and W together…")
@hosted.metered
def joint_random(s: joint.RandomSettings) -> dict:
    """`attsvm.joint.random_study` on random instances."""
    return joint.random_study(s)


@st.cache_data(max_entries=32, ttl=TTL, show_spinner="Running (K, Q)-GD from a small start…")
@hosted.metered
def staircase_study(pspec: ProblemSpec, s: staircase.StudySettings) -> dict:
    """`attsvm.staircase.study` on the sidebar's problem."""
    return staircase.study(pspec.build(), s)


# -- Real words ---------------------------------------------------------------------------------
@st.cache_data(max_entries=16, ttl=TTL, show_spinner="Running GD on the sentences…")
@hosted.metered
def words(s: real_words.Study) -> real_words.WordsStudy:
    """`attsvm.experiments.real_words.study` (the Real words page)."""
    return real_words.study(s)


# -- Deeper: a hierarchy of SVMs --------------------------------------------------------------
@st.cache_resource(show_spinner=False)
def stack_runs() -> SharedRuns:
    """The hierarchy page's finished live runs, by their settings (one store per server)."""
    return SharedRuns(16)


@st.cache_data(max_entries=32, ttl=TTL, show_spinner="Solving each head's Att-SVM…")
@hosted.metered
def stack_audit(spec, _run, tau: float = 0.5):
    """`attsvm.stack_live.audit` of the run of `spec` (the run is keyed by its spec)."""
    return stack_live.audit(spec, _run, tau=tau)
