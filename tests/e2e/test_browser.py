"""Real-browser test of the explorer: Debian's chromium driven by Playwright.

Starts `streamlit run app.py` on a free port, opens every page, presses Play on the
playground, waits for the Altair charts, fails on any exception or error box (st.error
and chart-rendering errors both render as `stAlertContentError`), and saves a screenshot
of each page under artifacts/screenshots/. Also checks that a URL with query parameters
reproduces the same problem, settings and numbers in a fresh browser.

Skipped (with the reason) when /usr/bin/chromium or Playwright is missing, unless the CI
environment variable is set, in which case that is a failure.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

ROOT = Path(__file__).parents[2]
SHOTS = ROOT / "artifacts" / "screenshots"
CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# url path -> file stem for the screenshot; every page of app.py
PAGES = {
    "": "overview",
    "start-here": "tour",
    "token-selection": "playground",
    "geometry-2d": "geometry",
    "local-optima": "basins",
    "over-parameterization": "overparam",
    "rank-collapse": "rank",
    "nonlinear-heads": "nonlinear",
    "causal-attention": "sequences",
    "next-token": "ntp",
    "optimizer-norm": "optimizers",
    "hierarchy-of-svms": "hierarchy",
    "a-real-transformer": "pretrained",
}
if (ROOT / "app_pages" / "reproduce.py").exists():
    PAGES["paper-figures"] = "reproduce"
NO_CHARTS_ON_LOAD = {"tour", "reproduce"}  # reproduce draws after its Run buttons
PAGE_TIMEOUT_MS = 90_000  # a slow CI machine under both workers' load
BAD = '[data-testid="stException"], [data-testid="stAlertContentError"]'
RUN_DONE = '[data-testid="stApp"][data-test-script-state="notRunning"]'
BUSY = '[data-testid="stSpinner"], [data-testid="stSkeleton"]'


def _unavailable(reason: str):
    if os.environ.get("CI"):
        pytest.fail(f"browser test cannot run in CI: {reason}")
    pytest.skip(reason)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def streamlit_server(
    *, mode: str | None = None, log_name: str = "e2e-server.log", args: tuple = ()
):
    """`streamlit run app.py` on a free local port (ATTSVM_MODE=`mode`, or unset; a hosted
    server starts as the Dockerfile starts it, `python -m ui.serve`, its imports done before
    it listens); yields (base URL, process) once its health check answers, and stops it
    afterwards."""
    if not Path(CHROMIUM).exists():
        _unavailable(f"{CHROMIUM} not found (apt-get install chromium)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        _unavailable("playwright is not installed (pip install -r requirements-dev.txt)")
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("ATTSVM_MODE", None)
    if mode:
        env["ATTSVM_MODE"] = mode
    _mkdirs()
    log = open(ROOT / "artifacts" / log_name, "w")
    start = ["-m", "ui.serve"] if mode == "hosted" else ["-m", "streamlit", "run", "app.py"]
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
            *args,
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 120
        while not healthy(base):
            if proc.poll() is not None or time.time() > deadline:
                pytest.fail(f"streamlit did not start (exit code {proc.poll()})")
            time.sleep(0.5)
        yield base, proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def healthy(base: str) -> bool:
    """The server's health check answers "ok"."""
    try:
        with urllib.request.urlopen(f"{base}/_stcore/health", timeout=5) as r:
            return r.read().strip() == b"ok"
    except OSError:
        return False


def _mkdirs() -> bool:
    SHOTS.mkdir(parents=True, exist_ok=True)
    return True


def _settle(page, charts: bool = False):
    """Wait until the script has finished (the app's root says so) and charts are drawn."""
    wait_idle(page)
    # Every page starts with a title; the sidebar's own page links come from app.py.
    page.wait_for_selector('[data-testid="stMain"] h1', timeout=PAGE_TIMEOUT_MS)
    page.wait_for_selector(
        '[data-testid="stSidebar"] [data-testid="stPageLink-NavLink"]', timeout=PAGE_TIMEOUT_MS
    )
    if charts:
        page.wait_for_selector(".vega-embed canvas, .vega-embed svg", timeout=PAGE_TIMEOUT_MS)
    # The run is over; it must stay over for a moment (a page may start another run of
    # itself) with no spinner or skeleton left. Progress bars are not waited out: a cached
    # result replays its finished bar, which stays on the page (waiting for it to go made
    # every such _settle sit out its whole timeout).
    deadline, quiet = time.time() + PAGE_TIMEOUT_MS / 1000, 0
    while time.time() < deadline and quiet < 3:
        idle = page.locator(RUN_DONE).count() and not page.locator(BUSY).count()
        quiet = quiet + 1 if idle else 0
        time.sleep(0.3)


def wait_idle(page, timeout_ms: float = PAGE_TIMEOUT_MS) -> None:
    """Wait until no script run is in progress: Streamlit's root element carries the
    frontend's run state in `data-test-script-state` ("initial" before the first run, then
    "running", "rerunRequested", "notRunning", ...), which Streamlit's own browser tests wait
    on. (The status widget this once polled is not in the page in Streamlit 1.67, so the
    old wait returned at once; CI then read pages mid-run.) Right after an action the
    server may not have started its run yet: wrap the action in `a_run` instead."""
    page.wait_for_selector(RUN_DONE, timeout=timeout_ms)


_OBSERVE_RUNS = """() => {
    const app = document.querySelector('[data-testid="stApp"]');
    if (window.__runObserver) window.__runObserver.disconnect();
    window.__runStates = [app.getAttribute('data-test-script-state')];  // running counts
    window.__runObserver = new MutationObserver(
        () => window.__runStates.push(app.getAttribute('data-test-script-state')));
    window.__runObserver.observe(app, {attributes: true,
                                       attributeFilter: ['data-test-script-state']});
}"""
_RAN = """() => window.__runStates.some(s => s !== 'notRunning') &&
    document.querySelector('[data-testid="stApp"]')
        .getAttribute('data-test-script-state') === 'notRunning'"""


@contextmanager
def a_run(page, timeout_ms: float = PAGE_TIMEOUT_MS):
    """Around an action that reruns the script (a click, an upload): on leaving, wait until
    a run has started since the action (or was running when it began) and has ended (the
    root's run state, recorded by a MutationObserver so that a run that ends quickly is not
    missed)."""
    page.wait_for_selector('[data-testid="stApp"]', timeout=timeout_ms)
    page.evaluate(_OBSERVE_RUNS)
    yield
    page.wait_for_function(_RAN, timeout=timeout_ms)


def run_states(page) -> str:
    """The root's run state now and the states recorded since the last `a_run` (for
    failure messages)."""
    return page.evaluate("""() => document.querySelector('[data-testid="stApp"]')
        .getAttribute('data-test-script-state') + ' after ' +
        JSON.stringify(window.__runStates || null)""")


def _check_clean(page, name: str):
    bad = page.locator(BAD)
    if bad.count():
        text = bad.first.inner_text()[:2000]
        page.screenshot(path=str(SHOTS / f"{name}-FAILED.png"), full_page=True)
        pytest.fail(f"page {name!r} shows an error: {text}")


def _open(browser, url: str):
    page = browser.new_page(viewport={"width": 1500, "height": 2400})
    page.goto(url, timeout=PAGE_TIMEOUT_MS)
    return page


@contextmanager
def clean_page(browser, url: str, name: str, *, charts: bool = True):
    """`url` in a new tab, settled (its charts drawn) and free of error boxes; closed after."""
    page = _open(browser, url)
    try:
        _settle(page, charts=charts)
        _check_clean(page, name)
        yield page
    finally:
        page.close()


@pytest.mark.parametrize("path", list(PAGES))
def test_every_page_renders_without_errors(server, browser, path):
    name = PAGES[path]
    page = _open(browser, f"{server}/{path}")
    try:
        _settle(page, charts=name not in NO_CHARTS_ON_LOAD)
        _check_clean(page, name)
        if name not in NO_CHARTS_ON_LOAD:
            assert page.locator(".vega-embed").count() >= 1
        page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)
        if name in PAGE_CHECKS:
            PAGE_CHECKS[name](page)
    finally:
        page.close()


def _sidebar_folds_away_unused_settings(page):
    """A page with its own settings: the sidebar's problem and training controls are out of
    sight under a label saying they are not used here (sidebar.OWN_SETTINGS)."""
    from ui.sidebar import UNUSED_LABEL

    side = page.locator('[data-testid="stSidebar"]')
    box = side.bounding_box()
    page.screenshot(
        path=str(SHOTS / "ntp-sidebar.png"),
        clip=dict(x=box["x"], y=box["y"], width=box["width"], height=700),
    )
    assert side.get_by_text(UNUSED_LABEL).is_visible()
    for label in ("Data", "n", "Data seed", "Head", "step size η", "Initialization"):
        field = side.get_by_label(label, exact=True)
        assert not any(field.nth(i).is_visible() for i in range(field.count())), label


def _optimizer_names_whole(page):
    """The optimizer picker shows each chosen name whole (no chip cuts its text short)."""
    from attsvm.studies import OPTIMIZER_THEORY

    picker = page.locator('[data-testid="stMain"] [data-testid="stMultiSelect"]').first
    picker.screenshot(path=str(SHOTS / "optimizers-picker.png"))
    tags = picker.locator("[data-tag]")
    names = [tags.nth(i).inner_text().strip() for i in range(tags.count())]
    assert names == [OPTIMIZER_THEORY[o][0] for o in ("ngd", "nmd", "sign", "spectral")]
    cut = [
        n
        for i, n in enumerate(names)
        if tags.nth(i).evaluate(
            "t => [t, ...t.querySelectorAll('*')].some(e => e.scrollWidth > e.clientWidth + 1)"
        )
    ]
    assert not cut, f"names cut short: {cut}"


PAGE_CHECKS = {"ntp": _sidebar_folds_away_unused_settings, "optimizers": _optimizer_names_whole}


def _iteration(page) -> tuple[int, int]:
    m = re.search(r"Iteration ([\d,]+) of ([\d,]+)", page.inner_text("body"))
    assert m, "the playground shows no iteration counter"
    return int(m.group(1).replace(",", "")), int(m.group(2).replace(",", ""))


def test_playground_play_runs_gd_live(server, browser):
    page = _open(browser, f"{server}/token-selection")  # default: 500 steps
    try:
        _settle(page, charts=True)
        page.get_by_role("button", name="Reset").click()
        page.wait_for_function(
            "document.body.innerText.includes('Iteration 0 of 500')", timeout=PAGE_TIMEOUT_MS
        )
        page.get_by_role("button", name="Play").click()
        seen = set()
        deadline = time.time() + 90
        while time.time() < deadline:
            k, total = _iteration(page)
            seen.add(k)
            if k == total:
                break
            time.sleep(0.25)
        assert _iteration(page)[0] == 500, "Play did not reach the last iteration"
        assert len(seen - {0, 500}) >= 2, f"no intermediate frames were drawn: {sorted(seen)}"
        page.wait_for_selector('button:has-text("Play")', timeout=PAGE_TIMEOUT_MS)
        _settle(page, charts=True)
        # the final rerun (Pause -> Play, timeline back) may still be drawing
        page.wait_for_function(
            "document.querySelectorAll('.vega-embed').length == 6", timeout=PAGE_TIMEOUT_MS
        )
        _check_clean(page, "playground-after-play")
        assert "Verdict at iteration 500" in page.inner_text("body")
        page.screenshot(path=str(SHOTS / "playground-after-play.png"), full_page=True)
    finally:
        page.close()


def _shown_numbers(page) -> dict:
    body = page.inner_text("body")
    alpha = re.search(r"GD selects α =\s*([\d·]+)", body)
    norms = re.findall(r"‖·‖ = ([\d.]+)", body)
    return dict(
        alpha=alpha.group(1) if alpha else None,
        norms=norms,
        problem=re.search(r"Problem: (random[^\n]*)", body).group(1),
    )


def test_url_reproduces_problem_settings_and_numbers(server, browser):
    import numpy as np

    import attsvm

    # Same sizes as the defaults (one compiled program), different data, init and step size.
    query = "seed=11&init_seed=3&lr=0.2&steps=300"
    views = []
    for _ in range(2):  # two fresh browser contexts
        ctx = browser.new_context(viewport={"width": 1500, "height": 2400})
        page = ctx.new_page()
        page.goto(f"{server}/token-selection?{query}", timeout=PAGE_TIMEOUT_MS)
        _settle(page, charts=True)
        _check_clean(page, "url")
        assert page.get_by_label("Data seed", exact=True).input_value() == "11"
        views.append(_shown_numbers(page))
        ctx.close()
    assert views[0] == views[1]
    assert views[0]["problem"].startswith("random n=6, T=8, d=10, seed=11")
    # The same run in the library gives the selection the page shows.
    prob = attsvm.random_problem(6, 8, 10, 11)
    run = attsvm.train(prob, steps=300, lr=0.2, seed=3, record_every=300)
    assert views[0]["alpha"] == "·".join(map(str, run.alpha))
    sol = attsvm.solve_att_svm(prob, run.alpha)
    assert np.isclose(float(views[0]["norms"][0]), sol.objective, rtol=1e-3)


def test_settings_survive_page_navigation(server, browser):
    page = _open(browser, f"{server}/?seed=5&lr=0.3")
    try:
        _settle(page)
        page.locator('[data-testid="stSidebar"]').get_by_role(
            "link", name="Token selection (live)"
        ).click()
        page.wait_for_url(re.compile(r".*/token-selection.*"), timeout=PAGE_TIMEOUT_MS)
        _settle(page, charts=True)
        body = page.inner_text("body")
        assert "random n=6, T=8, d=10, seed=5" in body and "η=0.3" in body
        assert "seed=5" in page.url and "lr=0.3" in page.url
    finally:
        page.close()


def test_the_tour_walks_from_step_to_step_with_its_banner(server, browser):
    page = _open(browser, f"{server}/start-here")
    try:
        _settle(page)
        page.get_by_role("link", name="Open step 1").click()
        page.wait_for_url(re.compile(r".*/token-selection\?.*tour=1.*"), timeout=PAGE_TIMEOUT_MS)
        _settle(page, charts=True)
        _check_clean(page, "tour-1")
        assert "Tour 1/7" in page.inner_text("body")
        page.get_by_role("link", name="Next step").click()
        page.wait_for_url(re.compile(r".*/geometry-2d\?.*tour=2.*"), timeout=PAGE_TIMEOUT_MS)
        _settle(page, charts=True)
        _check_clean(page, "tour-2")
        assert "Tour 2/7" in page.inner_text("body")
        page.screenshot(path=str(SHOTS / "tour-2.png"), full_page=True)
    finally:
        page.close()
