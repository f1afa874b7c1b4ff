"""A fresh hosted server's first page, timed in headless Chromium:

seconds from starting the server (an empty results store, its background filler on, as the
Dockerfile starts it) until a first visitor, who opens /paper-figures as soon as the health
check answers, sees the page's title. Split into "server up" (the health check answers) and
"title after opening". Both start commands, alternating, `--runs` times each:

    python benchmarks/first_page.py [--runs 3]

`python -m ui.serve` imports the pages' modules before the server listens; `streamlit run
app.py` imports them in the first script run. A benchmark, not a test: run it by hand on a
quiet machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import first_look  # noqa: E402

COMMANDS = {"ui.serve": True, "streamlit run": False}  # name: started as `python -m ui.serve`


def first_title(pw, preload: bool) -> tuple[float, float]:
    """(server up, title after opening) in seconds for one fresh server and browser."""
    with tempfile.TemporaryDirectory() as store:
        os.environ["ATTSVM_RESULTS"] = store  # the server's environment: an empty store
        browser = pw.chromium.launch(executable_path=first_look.CHROMIUM, args=first_look.ARGS)
        page = browser.new_page()
        t0 = time.perf_counter()
        proc, base = first_look._server(hosted=True, preload=preload)
        try:
            up = time.perf_counter() - t0
            page.goto(f"{base}/paper-figures", timeout=120_000)
            page.wait_for_selector('[data-testid="stMain"] h1', timeout=120_000)
            return up, time.perf_counter() - t0 - up
        finally:
            browser.close()
            proc.terminate()
            proc.wait(timeout=30)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3, help="fresh servers per start command")
    args = ap.parse_args(argv)
    from playwright.sync_api import sync_playwright

    totals: dict[str, list[float]] = {name: [] for name in COMMANDS}
    with sync_playwright() as pw:
        for i in range(args.runs):
            for name, preload in COMMANDS.items():
                up, title = first_title(pw, preload)
                totals[name].append(up + title)
                print(
                    f"run {i}  {name:14s} server up {up:5.2f} s, title {title:5.2f} s "
                    f"after opening: {up + title:5.2f} s after start",
                    flush=True,
                )
    med = {name: statistics.median(t) for name, t in totals.items()}
    for name, m in med.items():
        print(
            f"{name:14s} median {m:5.2f} s (min {min(totals[name]):.2f}, "
            f"max {max(totals[name]):.2f})"
        )
    print(f"streamlit run / ui.serve: {med['streamlit run'] / med['ui.serve']:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
