"""Time to the first look: for every page, seconds from navigation to the sidebar and to the
first drawn chart, in headless Chromium, on a cold server (first visit after start) and warm
(the same link again, in a fresh browser context). Prints a table of medians.

    python benchmarks/first_look.py [--repeat 3] [--pages overview,playground]

Starts `streamlit run app.py` on a free local port (hosted mode unless --local), drives
Debian's chromium through Playwright, and stops the server at the end. A benchmark, not a
test: run it by hand on a quiet machine.
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
PAGES = {"overview": "", "tour": "start-here", "playground": "token-selection",
         "geometry": "geometry-2d", "basins": "local-optima",
         "overparam": "over-parameterization", "rank": "rank-collapse",
         "nonlinear": "nonlinear-heads", "sequences": "causal-attention",
         "ntp": "next-token", "reproduce": "paper-figures"}
NO_CHART = {"tour", "reproduce"}
SIDEBAR = '[data-testid="stSidebar"] [data-testid="stPageLink-NavLink"]'
CHART = ".vega-embed canvas, .vega-embed svg"


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _server(hosted: bool):
    port = _port()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env["ATTSVM_MODE"] = "hosted" if hosted else "local"
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true",
         "--server.port", str(port), "--server.address", "127.0.0.1",
         "--browser.gatherUsageStats", "false"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    for _ in range(240):
        try:
            with urllib.request.urlopen(f"{base}/_stcore/health", timeout=2) as r:
                if r.read().strip() == b"ok":
                    return proc, base
        except OSError:
            time.sleep(0.5)
    proc.kill()
    raise SystemExit("streamlit did not start")


def _visit(browser, url: str, chart: bool) -> tuple[float, float]:
    ctx = browser.new_context(viewport={"width": 1400, "height": 1800})
    page = ctx.new_page()
    try:
        t0 = time.perf_counter()
        page.goto(url, timeout=120_000)
        page.wait_for_selector(SIDEBAR, timeout=120_000)
        t_side = time.perf_counter() - t0
        t_chart = float("nan")
        if chart:
            page.wait_for_selector(CHART, timeout=120_000)
            t_chart = time.perf_counter() - t0
        return t_side, t_chart
    finally:
        ctx.close()


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
            for name in names:
                url = f"{base}/{PAGES[name]}"
                chart = name not in NO_CHART
                cold = _visit(browser, url, chart)          # first visit of this page
                warm = [_visit(browser, url, chart) for _ in range(args.repeat)]
                rows.append((name, cold, (statistics.median(w[0] for w in warm),
                                          statistics.median(w[1] for w in warm))))
            browser.close()
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    print(f"{'page':<11} {'sidebar cold':>13} {'chart cold':>11} {'sidebar warm':>13} "
          f"{'chart warm':>11}   (seconds; warm = median of {args.repeat})")
    for name, (sc, cc), (sw, cw) in rows:
        print(f"{name:<11} {sc:>13.2f} {cc:>11.2f} {sw:>13.2f} {cw:>11.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
