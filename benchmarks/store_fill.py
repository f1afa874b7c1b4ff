"""The results store on a fresh hosted server, timed in headless Chromium:

1. a hosted server with an empty store (ATTSVM_RESULTS): seconds until the Reproduce page's
   title, then until each card shows its stored result (no click), the paper's and the
   follow-ups';
2. meanwhile, while the background filler runs, a visitor's in-app page change (Overview ->
   a page) timed to its first chart, as benchmarks/first_look.py does;
3. the server restarted on the filled folder: seconds until every card's chart is drawn.

    python benchmarks/store_fill.py [--store DIR] [--page geometry-2d] [--timeout 900]

A benchmark, not a test: run it by hand (it takes minutes: the paper's defaults).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import first_look  # noqa: E402

from attsvm import experiments, store  # noqa: E402

BODY = "document.body.innerText"


def _count(page, text: str) -> int:
    return page.evaluate(f"{BODY}.split({text!r}).length - 1")


def _parser() -> argparse.ArgumentParser:
    """The script's options: the store folder, the page to time, the wait, the server."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", default=None, help="store folder (default: a new empty one)")
    ap.add_argument("--page", default="geometry-2d", help="in-app page to time meanwhile")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds to wait for all")
    ap.add_argument(
        "--plain",
        action="store_true",
        help="start with `streamlit run app.py` instead of the Dockerfile's "
        "`python -m ui.serve` (imports before listening)",
    )
    return ap


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    preload = not args.plain
    from playwright.sync_api import sync_playwright

    root = args.store or tempfile.mkdtemp(prefix="attsvm-results-")
    os.environ["ATTSVM_RESULTS"] = root
    os.environ.pop(store.SETTINGS_ENV, None)
    n_paper, n_all = len(experiments.EXPERIMENTS), len(store.names())
    print(f"store {root}: {n_paper} paper + {n_all - n_paper} follow-up experiments")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=first_look.CHROMIUM, args=first_look.ARGS)
        t_start = time.perf_counter()
        proc, base = first_look._server(hosted=True, preload=preload)
        t_server = time.perf_counter()
        print(
            f"server ({'python -m ui.serve' if preload else 'streamlit run'}) answered "
            f"{t_server - t_start:.1f} s after its start"
        )
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1800})
            t0 = time.perf_counter()
            page.goto(f"{base}/paper-figures", timeout=120_000)
            page.wait_for_selector('[data-testid="stMain"] h1', timeout=120_000)
            print(f"page title: {time.perf_counter() - t0:.1f} s after opening it")
            tab = browser.new_page(viewport={"width": 1400, "height": 1800})
            inapp, seen, t_paper = [], 0, None
            while time.perf_counter() - t0 < args.timeout:
                done = _count(page, "Computed by attsvm")
                if done != seen:
                    seen = done
                    print(
                        f"  {done:2d} of {n_all} cards stored at {time.perf_counter() - t0:6.1f} s",
                        flush=True,
                    )
                if done >= n_paper and t_paper is None:
                    t_paper = time.perf_counter() - t0
                if done >= n_all:
                    break
                if len(inapp) < 3 and done < n_paper:  # while the filler computes
                    inapp.append(first_look._in_app(tab, base, args.page, True))
                    print(
                        f"  in-app change to {args.page} while filling: first chart "
                        f"{inapp[-1][1]:.2f} s",
                        flush=True,
                    )
                time.sleep(1.0)
            lag = t0 - t_server
            print(
                f"paper's {n_paper} cards: {t_paper and round(t_paper, 1)} s after opening the "
                f"page ({t_paper and round(t_paper + lag)} s after the server answered); "
                f"{seen} of {n_all} stored after {time.perf_counter() - t0:.1f} s"
            )
        finally:
            proc.terminate()
            proc.wait(timeout=30)
        _restarted(browser, seen, preload)
        browser.close()
    return 0


def _restarted(browser, seen: int, preload: bool) -> None:
    """A new server on the filled folder: seconds until the page shows `seen` charts."""
    proc, base = first_look._server(hosted=True, preload=preload)
    try:
        page = browser.new_page(viewport={"width": 1400, "height": 1800})
        t0 = time.perf_counter()
        page.goto(f"{base}/paper-figures", timeout=120_000)
        page.wait_for_function(
            f"document.querySelectorAll('.vega-embed').length >= {seen}", timeout=120_000
        )
        print(
            f"restarted on the filled folder: {seen} charts "
            f"{time.perf_counter() - t0:.1f} s after opening the page"
        )
    finally:
        proc.terminate()
        proc.wait(timeout=30)


if __name__ == "__main__":
    raise SystemExit(main())
