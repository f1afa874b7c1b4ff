"""attsvm.limits: prices, refusals that name the largest size that fits, time budgets."""

from __future__ import annotations

import threading
import time

import pytest

import attsvm
from attsvm import limits
from attsvm.limits import LIMITS, BudgetError
from ui import budget
from ui.budget import Cancelled, Deadline, SessionBudget

HOSTED, LOCAL = LIMITS["hosted"], LIMITS["local"]


class Clock:
    """A settable clock for the time budgets."""

    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


def test_mode_reads_the_environment_and_falls_back_to_local(monkeypatch):
    monkeypatch.setenv("ATTSVM_MODE", " Hosted ")
    assert limits.mode() == "hosted" and limits.current() is HOSTED
    monkeypatch.setenv("ATTSVM_MODE", "<script>")
    assert limits.mode() == "local"
    monkeypatch.delenv("ATTSVM_MODE")
    assert limits.current() is LOCAL


def test_hosted_caps_are_tighter_than_local_on_every_axis():
    for f in (
        "max_work",
        "max_runs",
        "max_steps",
        "max_n",
        "max_T",
        "max_d",
        "max_svm_solves",
        "max_record_floats",
        "max_upload_bytes",
        "action_seconds",
        "session_seconds",
    ):
        assert getattr(HOSTED, f) < getattr(LOCAL, f), f


def test_mode_caps_lie_within_the_library_input_ranges():
    from attsvm import problems

    assert (problems.MAX_N, problems.MAX_T, problems.MAX_D) == (
        limits.MAX_N,
        limits.MAX_T,
        limits.MAX_D,
    )  # one home: limits
    for L in LIMITS.values():
        assert L.max_n <= limits.MAX_N and L.max_T <= limits.MAX_T and L.max_d <= limits.MAX_D


def test_gd_work_follows_the_documented_formula():
    n, T, d, m, steps, runs = 3, 4, 5, 2, 7, 6
    w = limits.gd_work(n=n, T=T, d=d, steps=steps, runs=runs)
    assert w == runs * steps * (n * T * d + 4 * d * d)
    kq = limits.gd_work(n=n, T=T, d=d, steps=steps, runs=runs, param="KQ", m=m)
    assert kq == w + runs * steps * d * d * m / 4
    seq = limits.gd_work(n=n, T=T, d=d, steps=steps, runs=runs, queries="sequence")
    assert seq == runs * steps * (n * T * T * d + 4 * d * d)


def test_svm_work_grows_with_every_size_and_the_nuclear_norm_costs_more():
    base = dict(n=8, T=8, d=16)
    w = limits.svm_work(**base)
    for k in base:
        assert limits.svm_work(**{**base, k: base[k] * 2}) > w
    assert limits.svm_work(**base, norm="nuc") > w
    assert limits.svm_work(**base, solves=3) == pytest.approx(3 * w)
    assert limits.svm_work(**base, queries="causal") < limits.svm_work(**base, queries="sequence")


@pytest.mark.parametrize(
    "name, value",
    [
        ("n", HOSTED.max_n + 1),
        ("T", HOSTED.max_T + 1),
        ("d", HOSTED.max_d + 1),
        ("steps", 20_001),
        ("runs", 501),
    ],
)
def test_a_setting_above_its_hosted_cap_is_refused_by_name(name, value):
    kw = {**dict(n=4, T=4, d=4, steps=10, runs=1), name: value}
    with pytest.raises(BudgetError, match=f"`{name}` must be at most .* in hosted mode; got "):
        limits.check_gd(**kw, limits=HOSTED)


def test_over_budget_gd_names_the_largest_steps_runs_and_n_that_fit():
    kw = dict(n=32, T=32, d=64, steps=20_000, runs=100, limits=HOSTED)
    with pytest.raises(BudgetError) as info:
        limits.check_gd(**kw)
    msg = str(info.value)
    assert "hosted mode" in msg and "largest that fits" in msg
    s = int(msg.split("steps=")[-1].split()[0].replace(",", ""))
    # The suggestion is the largest that fits: it passes, one more does not.
    limits.check_gd(**{**kw, "steps": s})
    with pytest.raises(BudgetError):
        limits.check_gd(**{**kw, "steps": s + 1})


def test_over_budget_svm_names_the_largest_d_that_fits():
    kw = dict(n=32, T=32, d=128, norm="nuc", limits=HOSTED)
    with pytest.raises(BudgetError, match=r"Att-SVM\* .* largest that fits is d=(\d+)") as info:
        limits.check_svm(**kw)
    d = int(str(info.value).split("d=")[-1].split()[0])
    assert 1 <= d < 128
    limits.check_svm(**{**kw, "d": d})
    with pytest.raises(BudgetError):
        limits.check_svm(**{**kw, "d": d + 1})


def test_check_svm_keeps_the_solve_count_only_form():
    assert limits.check_svm(solves=10, limits=HOSTED) == 0.0
    with pytest.raises(BudgetError, match="`solves` must be at most 2,000"):
        limits.check_svm(solves=2001, limits=HOSTED)


def test_the_papers_default_sizes_fit_the_hosted_budget():
    limits.check_gd(n=6, T=8, d=10, steps=2000, runs=100, param="KQ", limits=HOSTED)
    for norm in ("fro", "nuc"):
        limits.check_svm(n=6, T=8, d=10, norm=norm, limits=HOSTED)


def test_recorded_history_is_capped_with_a_record_every_hint():
    with pytest.raises(BudgetError, match="Record every [0-9,]+ steps or more"):
        limits.check_gd(n=6, T=8, d=10, steps=20_000, runs=100, record_every=1, limits=HOSTED)
    limits.check_gd(n=6, T=8, d=10, steps=20_000, runs=1, record_every=100, limits=HOSTED)


def test_budget_errors_are_value_errors_so_pages_show_them():
    assert issubclass(BudgetError, ValueError) and issubclass(Cancelled, BudgetError)


def test_deadline_expires_and_cancel_event_stops_work():
    clock = Clock()
    dl = Deadline(5, clock=clock, limits=HOSTED)
    dl.check()
    clock.t += 6
    with pytest.raises(Cancelled, match="at most 5 s") as info:
        dl.check()
    assert info.value.reason == "deadline"
    ev = threading.Event()
    dl = Deadline(limits=HOSTED, cancel=ev)
    assert dl.seconds == HOSTED.action_seconds
    ev.set()
    with pytest.raises(Cancelled) as info:
        dl.check()
    assert info.value.reason == "cancelled"


def test_session_budget_refuses_once_spent_then_recovers_as_the_window_slides():
    clock = Clock()
    b = SessionBudget(HOSTED, clock=clock)
    b.check()
    b.charge(HOSTED.session_seconds / 2)
    clock.t += 100
    b.charge(HOSTED.session_seconds / 2)
    with pytest.raises(BudgetError, match=r"try again in (\d+) s") as info:
        b.check()
    wait = int(str(info.value).split("try again in ")[1].split()[0])
    assert wait == pytest.approx(HOSTED.session_window - 100, abs=1)
    clock.t += wait + 1  # the first charge left the window
    b.check()
    assert b.spent() == pytest.approx(HOSTED.session_seconds / 2)


def test_local_session_budget_never_refuses():
    b = SessionBudget(LOCAL)
    b.charge(1e9)
    b.check()


def test_compute_slots_bound_concurrency_and_are_reentrant():
    L = limits.Limits(**{**HOSTED.__dict__, "max_concurrent": 2, "queue_seconds": 0.2})
    inside, peak, lock = [0], [0], threading.Lock()

    def work():
        with budget.compute_slot(L):
            with budget.compute_slot(L):  # nested: no second slot, no deadlock
                with lock:
                    inside[0] += 1
                    peak[0] = max(peak[0], inside[0])
                time.sleep(0.05)
                with lock:
                    inside[0] -= 1

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert peak[0] == 2


def test_a_full_server_answers_busy_after_the_queue_wait():
    L = limits.Limits(**{**HOSTED.__dict__, "max_concurrent": 1, "queue_seconds": 0.05})
    holding, release = threading.Event(), threading.Event()

    def hold():
        with budget.compute_slot(L):
            holding.set()
            release.wait(5)

    t = threading.Thread(target=hold)
    t.start()
    holding.wait(5)
    try:
        with pytest.raises(BudgetError, match="server is busy"):
            with budget.compute_slot(L):
                pass
    finally:
        release.set()
        t.join()


def test_gd_work_prices_the_span_form_where_the_engine_takes_it():
    """W-GD by gd/ngd/polyak with a record interval the span form pays for (n = 3, T = 4,
    d = 10, every 100th step: p = 12, 12·12 + 4·12 = 192 units a step) costs the span
    form's price; another rule, no record interval, or sizes where the plain form is the
    engine's choice (every step recorded) keep the plain formula."""
    plain = 3 * 4 * 10 + 4 * 100
    kw = dict(n=3, T=4, d=10, steps=2000, runs=5)
    assert limits.gd_work(**kw, record_every=100) == 5 * 2000 * 192
    assert limits.gd_work(**kw, record_every=100, optimizer="sign") == 5 * 2000 * plain
    assert limits.gd_work(**kw) == 5 * 2000 * plain
    assert limits.gd_work(**kw, record_every=1) == 5 * 2000 * plain
    assert limits.gd_work(**kw, record_every=100, param="KQ") > 5 * 2000 * plain


@pytest.mark.parametrize(
    "n, T, d, norm, queries",
    [
        (6, 8, 10, "fro", "single"),
        (48, 32, 64, "fro", "single"),
        (12, 12, 16, "nuc", "single"),
        (32, 32, 32, "nuc", "single"),
        (4, 6, 5, "fro", "sequence"),
        (16, 8, 16, "fro", "sequence"),
        (8, 10, 12, "fro", "causal"),
    ],
)
def test_the_svm_route_is_the_solver_solve_att_svm_takes(n, T, d, norm, queries):
    """svm_work prices the method "auto" really runs: Clarabel or the certified solvers."""
    prob = attsvm.random_problem(n, T, d, seed=1, queries=queries)
    sol = attsvm.solve_att_svm(prob, norm=norm)
    route = limits.svm_route(n=n, T=T, d=d, norm=norm, queries=queries)
    assert (sol.solver == "CLARABEL") == (route == "CLARABEL")
    price = limits.svm_work(n=n, T=T, d=d, norm=norm, queries=queries)
    m = limits._constraints(n, T, queries)
    q = n * (1 if queries == "single" else T)
    expect = (
        limits.clarabel_work(n=n, T=T, d=d, norm=norm, queries=queries)
        if route == "CLARABEL"
        else limits.pairs_work(m=m, d=d, d2=d, q=q, norm=norm)
    )
    assert price == expect


def test_the_large_sizes_are_priced_by_the_certified_solvers_not_clarabel():
    """Above Clarabel's 0.2 s (Frobenius) or 2 s (nuclear), "auto" takes `attsvm.pairsvm`:
    the price is that method's, orders of magnitude below Clarabel's, and a forced Clarabel
    (or SCS) keeps Clarabel's price."""
    for kw in (dict(n=64, T=64, d=128), dict(n=32, T=32, d=32, norm="nuc")):
        assert limits.svm_route(**kw) == "pairs"
        assert limits.svm_work(**kw) < limits.clarabel_work(**kw) / 20
        for solver in ("CLARABEL", "SCS"):
            assert limits.svm_work(**kw, solver=solver) == limits.clarabel_work(**kw)
    # a hosted visitor's largest single-query Frobenius SVM, and the nuclear one at d = 32
    for norm, d in (("fro", 64), ("nuc", 32)):
        limits.check_svm(n=32, T=32, d=d, norm=norm, limits=HOSTED)


@pytest.mark.parametrize("m, d, q", [(56, 16, 8), (4032, 16, 64), (992, 64, 32), (31744, 64, 1024)])
def test_the_frobenius_price_follows_the_method_pairsvm_picks(m, d, q):
    from attsvm import pairsvm

    method = pairsvm.pick_solver(m, d, d, q, "fro")
    p = min(d, m) * min(d, q)
    x = m * d + q * d * d
    cost = {"ldp": 3 * m * p * p, "newton": 400 * x, "wsnewton": 2000 * x * max(1, m / (4 * p))}
    assert limits.pairs_work(m=m, d=d, d2=d, q=q) == 5e6 + cost[method]
    assert (method == "ldp") == (p <= limits.LDP_MAX_DIM)


def test_the_nuclear_fallback_to_clarabel_is_taken_only_where_clarabel_is_cheap():
    assert limits.nuc_fallback(m=56, d=16, d2=16, q=8)
    assert not limits.nuc_fallback(m=992, d=64, d2=64, q=32)  # Clarabel: about 100 s here
    base = limits.pairs_work(m=992, d=64, d2=64, q=32, norm="nuc")
    small = limits.pairs_work(m=56, d=16, d2=16, q=8, norm="nuc")
    fallback = limits.clarabel_pairs_work(m=56, d=16, d2=16, q=8, norm="nuc")
    assert small > fallback and base > small


def test_gd_and_its_svms_are_refused_together_with_a_suggestion_that_fits_them_together():
    """A page runs GD and solves both SVMs in one action: the Att-SVM* alone fits up to some d
    at n = T = 32, but GD beside it does not; the combined refusal names a d that fits the
    whole action (and d + 1 does not)."""
    kw = dict(n=32, T=32, steps=200, param="W", limits=HOSTED, svms=("fro", "nuc"))
    svm_alone = pytest.raises(
        BudgetError, limits.check_svm, n=32, T=32, d=128, norm="nuc", limits=HOSTED
    )
    d_svm = int(str(svm_alone.value).split("d=")[-1].split()[0])
    with pytest.raises(
        BudgetError, match=r"and its SVM solutions .* largest that fits is .*d=(\d+)"
    ) as info:
        limits.check_gd(**kw, d=d_svm)
    d = int(str(info.value).split("d=")[-1].split()[0])
    assert d < d_svm
    limits.check_gd(**kw, d=d)
    with pytest.raises(BudgetError):
        limits.check_gd(**kw, d=d + 1)
    assert limits.check_gd(**{**kw, "svms": ()}, d=d) < limits.check_gd(**kw, d=d)
