"""The results store (`attsvm.store`) as the server sees it: one background filler per
server process, shared by every session and charged to none, and each stored entry read
and checked once per version of it."""

from __future__ import annotations

import contextlib
import threading
import time
from pathlib import Path

import streamlit as st

from attsvm import filler, store

RESTART_S = 60.0  # a finished filler is started again (entries gone missing) at most this often


class _Server:
    """This server's filler, started again when it has ended and entries are missing."""

    def __init__(self):
        self.lock, self.filler, self.started = threading.Lock(), None, -RESTART_S
        self.pages = 0  # visitors' script runs in progress (`page_running`)

    @contextlib.contextmanager
    def page(self):
        """While any visitor's page runs, the filler is suspended (`filler.Filler.pause`)."""
        with self.lock:
            self.pages += 1
            if self.pages == 1 and self.filler is not None:
                self.filler.pause(True)
        try:
            yield
        finally:
            with self.lock:
                self.pages -= 1
                if self.pages == 0 and self.filler is not None:
                    self.filler.pause(False)

    def ensure(self, needed) -> None:
        with self.lock:
            if self.filler is not None and self.filler.running:
                return
            if self.filler is not None and time.monotonic() - self.started < RESTART_S:
                return
            if self.filler is not None and not needed():
                return
            self.filler, self.started = filler.Filler(store.folder()), time.monotonic()
            if self.pages:
                self.filler.pause(True)

    @property
    def running(self) -> bool:
        return self.filler is not None and self.filler.running


@st.cache_resource(show_spinner=False)
def _server() -> _Server:
    return _Server()


def start_filler() -> None:
    """Start this server's background filler once (again, where entries have gone
    missing since it ended); nothing when `ATTSVM_FILL=0`."""
    if filler.fill_enabled():
        _server().ensure(
            lambda: any(
                entry(n) is None and store.state(n).kind != "failed" for n in filler.fill_names()
            )
        )


def page_running():
    """A context for one script run of a visitor's page: the server's filler waits while any
    runs, so visitors have every core (the filler's work is charged to no visitor, and not
    to their waiting either)."""
    return _server().page()


def filling() -> bool:
    """Whether the results this page lacks are on their way (this server's filler runs,
    or another server sharing the folder computes one)."""
    return filler.fill_enabled() and (
        _server().running or any(store.state(n).kind == "computing" for n in store.names())
    )


def queued(name: str) -> bool:
    """Whether `name`'s result is on its way (see `filling`)."""
    return name in filler.fill_names() and filling()


@st.cache_resource(show_spinner=False, max_entries=256)
def _load(name: str, path: str, stamp: tuple) -> store.Entry | None:
    return store.load(name)


def entry(name: str) -> store.Entry | None:
    """`name`'s complete stored entry, or None (read again only when it is replaced)."""
    stamp = store.stamp(name)
    if stamp is None:
        return None
    return _load(name, str(store.entry_path(name)), stamp)


@st.cache_resource(show_spinner=False, max_entries=256)
def _chart(name: str, path: str, stamp: tuple):
    from attsvm_charts import experiments as experiment_charts

    e = entry(name)
    if e is None:
        return None
    try:
        return experiment_charts.chart(e.result)
    except Exception:  # noqa: BLE001  (tables read back from CSV; the log says why)
        store.log.exception("results store: cannot draw %s's chart from its tables", name)
        return False


def chart(name: str):
    """The chart of `name`'s stored entry (built once per entry); None when there is no
    entry, False when its tables do not make a chart (logged)."""
    stamp = store.stamp(name)
    return None if stamp is None else _chart(name, str(store.entry_path(name)), stamp)


def where() -> Path:
    return store.folder()
