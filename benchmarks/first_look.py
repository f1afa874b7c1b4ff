"""Time to the first look: for every page, seconds from navigation to the sidebar and to the
first drawn chart, in headless Chromium. Four ways to arrive:

- cold: the first visit of the page's link after the server started (fresh browser context);
- new visitor: the same link again on the warm server, in a fresh browser context (the
  whole Streamlit frontend and its lazily loaded element bundles are fetched and parsed);
- returning: the same link again in one browser context (the browser cache holds the
  frontend, as for a visitor who has been here before);
- in-app: a click on the page's sidebar link from the Overview once its hero has played
  (the frontend is already running; only the page's script runs): how a visitor moves
  between pages. Timed to the new page's own title and first chart (the Overview's, still
  on screen until the new run marks them stale, never count).

Prints a table of medians.

    python benchmarks/first_look.py [--repeat 3] [--pages overview,playground]

Starts `streamlit run app.py` on a free local port (hosted mode unless --local), drives
Debian's chromium through Playwright, and stops the server at the end. A benchmark, not a
test: run it by hand on a quiet machine (or under `nice -n -10` on a shared one).
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run"]
PAGES = {
    "overview": "",
    "tour": "start-here",
    "playground": "token-selection",
    "geometry": "geometry-2d",
    "basins": "local-optima",
    "overparam": "over-parameterization",
    "rank": "rank-collapse",
    "nonlinear": "nonlinear-heads",
    "sequences": "causal-attention",
    "ntp": "next-token",
    "optimizers": "optimizer-norm",
    "reproduce": "paper-figures",
    "hierarchy": "hierarchy-of-svms",
    "pretrained": "a-real-transformer",
}
NO_CHART = {"tour", "reproduce"}
SIDEBAR = '[data-testid="stSidebar"] [data-testid="stPageLink-NavLink"]'
CHART = ".vega-embed canvas, .vega-embed svg"


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _server(hosted: bool, preload: bool = False):
    """A server on a free port; `preload`: started as the Dockerfile starts it
    (`python -m ui.serve`: imports done before it listens) instead of `streamlit run`."""
    port = _port()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env["ATTSVM_MODE"] = "hosted" if hosted else "local"
    start = ["-m", "ui.serve"] if preload else ["-m", "streamlit", "run", "app.py"]
    proc = subprocess.Popen(
        [
            sys.executable,
            *start,
            "--server.headless",
            "true",
            "--server.port",
            str(port),
            "--server.address",
            "127.0.0.1",
            "--browser.gatherUsageStats",
            "false",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120  # polled often: first_page.py times the start
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with urllib.request.urlopen(f"{base}/_stcore/health", timeout=2) as r:
                if r.read().strip() == b"ok":
                    return proc, base
        except OSError:
            time.sleep(0.02)
    proc.kill()
    raise SystemExit("streamlit did not start")


def _visit(browser, url: str, chart: bool, ctx=None) -> tuple[float, float]:
    """Open `url` in a new tab of `ctx` (a fresh browser context when None)."""
    own = ctx is None
    ctx = ctx or browser.new_context(viewport={"width": 1400, "height": 1800})
    page = ctx.new_page()
    try:
        return _timed(
            page, lambda: page.goto(url, timeout=120_000), SIDEBAR, CHART if chart else None
        )
    finally:
        page.close()
        if own:
            ctx.close()


# The title and a chart drawn by the current run (Streamlit marks the previous run's
# elements stale).
FRESH = '[data-testid="stMain"] [data-testid="stElementContainer"]:not([data-stale="true"])'
OVERVIEW_TITLE = "Transformers as Support Vector Machines"
FRESH_TITLE = f'{FRESH} h1:not(:has-text("{OVERVIEW_TITLE}"))'
FRESH_CHART = f"{FRESH} .vega-embed :is(canvas, svg)"
RUNNING = '[data-testid="stStatusWidget"]'


def _settled(page, timeout_s: float = 60.0) -> None:
    """Wait until the app's script run has ended (no "Running" status widget)."""
    deadline = time.time() + timeout_s
    time.sleep(0.3)
    while time.time() < deadline and page.locator(RUNNING).count():
        time.sleep(0.1)


def _in_app(page, base: str, url: str, chart: bool) -> tuple[float, float]:
    """From the Overview (its hero played), click the sidebar link to `url`; seconds to the
    page's own title drawn by the new run (the "sidebar" column) and to its first chart."""
    page.goto(base, timeout=120_000)
    page.wait_for_selector(CHART, timeout=120_000)
    _settled(page)
    link = page.locator(f'{SIDEBAR}[href^="{url}"]').first
    return _timed(page, link.click, FRESH_TITLE, FRESH_CHART if chart else None)


def _timed(page, go, first: str, chart: str | None) -> tuple[float, float]:
    """Seconds from `go()` to the selector `first`, and to `chart` (NaN when None)."""
    t0 = time.perf_counter()
    go()
    page.wait_for_selector(first, timeout=120_000)
    t_first = time.perf_counter() - t0
    if chart is None:
        return t_first, float("nan")
    page.wait_for_selector(chart, timeout=120_000)
    return t_first, time.perf_counter() - t0


def _median(visits, i):
    return statistics.median(v[i] for v in visits)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3, help="warm visits per page (median)")
    ap.add_argument("--pages", default=",".join(PAGES), help="comma-separated page names")
    ap.add_argument("--local", action="store_true", help="local mode instead of hosted")
    args = ap.parse_args(argv)
    from playwright.sync_api import sync_playwright

    names = [p for p in args.pages.split(",") if p in PAGES]
    rows = []
    proc, base = _server(hosted=not args.local)
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            ctx = browser.new_context(viewport={"width": 1400, "height": 1800})
            tab = ctx.new_page()
            for name in names:
                url = f"{base}/{PAGES[name]}"
                chart = name not in NO_CHART
                cold = _visit(browser, url, chart)  # first visit of this page
                new = [_visit(browser, url, chart) for _ in range(args.repeat)]
                back = [_visit(browser, url, chart, ctx=ctx) for _ in range(args.repeat)]
                inapp = (
                    [_in_app(tab, base, PAGES[name], chart) for _ in range(args.repeat)]
                    if PAGES[name]
                    else back
                )
                rows.append(
                    (name, cold, *((_median(v, 0), _median(v, 1)) for v in (new, back, inapp)))
                )
            ctx.close()
            browser.close()
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    heads = ("cold", "new visitor", "returning", "in-app")
    print(f"{'':<11}" + "".join(f"{h:>22}" for h in heads))
    print(
        f"{'page':<11}"
        + "   sidebar      chart" * len(heads)
        + f"   (seconds; warm = median of {args.repeat})"
    )
    for name, *cols in rows:
        print(f"{name:<11}" + "".join(f"{a:>11.2f}{b:>11.2f}" for a, b in cols))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
