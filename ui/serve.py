"""Start the explorer with its imports done before the server listens:

    python -m ui.serve [options of `streamlit run`, e.g. --server.port=8501]

`streamlit run app.py` imports JAX, cvxpy, pandas, Altair and the library during the first
visitor's first script run: ≈ 3 s on the 2-core machine, so a fresh server's first page
took 5–6 s to show its title (benchmarks/store_fill.py). Streamlit runs app.py in threads of
its own process, so modules imported here, before the server starts, are loaded for every
session: the server takes those seconds to come up (its health check answers after them)
and its first visitor does not wait for them. The hosted image starts this way
(Dockerfile; docs/hosting.md).
"""

from __future__ import annotations

import importlib
import logging
import os
import pkgutil
import sys
from pathlib import Path

APP = Path(__file__).resolve().parents[1] / "app.py"


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


def main(argv: list[str] | None = None) -> int:
    preload()
    from streamlit.web import cli

    sys.argv = ["streamlit", "run", str(APP), *(sys.argv[1:] if argv is None else argv)]
    return cli.main()


if __name__ == "__main__":
    sys.exit(main())
