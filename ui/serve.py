"""Start the explorer with its imports begun before the first visitor arrives:

    python -m ui.serve [options of `streamlit run`, e.g. --server.port=8501]

`streamlit run app.py` imports JAX, cvxpy, pandas, Altair and the library during the first
visitor's first script run (≈ 2–3 s on the 2-core machine). Streamlit runs app.py in threads
of its own process, so modules imported here are loaded for every session. They are imported
in a background thread while the server starts and the first browser loads Streamlit's
frontend, so the two overlap; app.py's first line waits for that thread, so a script run never
imports a module while the thread is importing it. The hosted image starts this way
(Dockerfile; docs/hosting.md; docs/performance.md says how the first page is timed).
"""

from __future__ import annotations

import importlib
import logging
import os
import pkgutil
import sys
import threading
from pathlib import Path

APP = Path(__file__).resolve().parents[1] / "app.py"

_loaded = threading.Event()
_loaded.set()  # nothing to wait for unless start_preload() ran in this process


def preload() -> list[str]:
    """Import what a page's script run imports: ui/ and its views (the library, JAX,
    cvxpy, pandas and Altair with them). Returns the modules' names."""
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # as app.py, before JAX
    os.environ.setdefault("ATTSVM_MALLOC", "system")  # as app.py
    import ui
    import ui.views

    names = [
        f"ui.{m.name}"
        for m in pkgutil.iter_modules(ui.__path__)
        if m.name not in ("serve", "views")
    ]
    names += [f"ui.views.{m.name}" for m in pkgutil.iter_modules(ui.views.__path__)]
    names += ["cvxpy"]  # attsvm.svm imports it on first use (its import alone takes ≈ 1.5 s)
    # st.cache_data decorators warn that no runtime exists yet; each call finds the server's
    # (Streamlit picks a cache's storage when it is called, not when it is decorated)
    from streamlit.runtime.caching import cache_data_api

    quiet = logging.getLogger(cache_data_api.__name__)
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        for name in names:
            importlib.import_module(name)
    finally:
        quiet.setLevel(level)
    # A process's first Streamlit element asks whether it runs in a REPL: inspect.stack(),
    # which resolves the file of every loaded module (0.3–0.6 s with all of the above).
    # inspect caches what it resolved, so done once here, the first visitor's run skips it.
    import inspect

    inspect.stack()
    return names


def start_preload() -> None:
    """Run `preload` in a background thread; `wait_for_preload` returns once it is done."""
    _loaded.clear()

    def run() -> None:
        try:
            preload()
        finally:
            _loaded.set()  # a failed import is then retried, and reported, by the script run

    threading.Thread(target=run, name="attsvm-preload", daemon=True).start()


def wait_for_preload() -> None:
    """Block until the background imports are done (at once when none were started)."""
    _loaded.wait()


def main(argv: list[str] | None = None) -> int:
    # The server's own modules are imported here, on the main thread, before the preload
    # thread starts: the two threads then never import the same package at the same time.
    from streamlit.runtime.caching import cache_data_api  # noqa: F401
    from streamlit.web import bootstrap, cli, server  # noqa: F401

    from ui import serve  # run as __main__, this file's state for app.py lives in ui.serve

    serve.start_preload()
    sys.argv = ["streamlit", "run", str(APP), *(sys.argv[1:] if argv is None else argv)]
    return cli.main()


if __name__ == "__main__":
    sys.exit(main())
