"""Train the head too: joint (v, W) training against the head SVM and the relaxed, tight and
balanced Att-SVMs (arXiv 2306.13596, arXiv 2410.14581; docs/joint.md)."""

import streamlit as st

from attsvm import joint, limits
from attsvm_charts import joint as charts
from ui import cache
from ui.export_ui import export_button
from ui.views import joint as view
from ui.widgets import BOUND, explained

view.intro()
c = st.columns([4, 2, 3, 2])
source = c[0].segmented_control(
    "Instance",
    view.SOURCES,
    key="jt_src",
    default="mmts-relaxed",
    required=True,
    **BOUND,
    help="MMTS: n=3, T=2, d=2 (tight: all three sequences are "
    "support vectors of v's SVM; relaxed: the third is not). "
    "MD-Att toy: n=2, T=3, d=2, W₀ = 0, v₀ = 0.",
)
steps = c[3].selectbox("steps", [200, 500, 1000, 2000, 5000], index=2, key="jt_steps", **BOUND)
if source != "random":
    dtype = c[1].segmented_control(
        "dtype",
        ["float64", "float32"],
        key="jt_dtype",
        default="float64",
        required=True,
        **BOUND,
        help="float32 also runs the authors' loop (numpy port)",
    )
    p = c[2].slider(
        "p (ℓp geometry of both tensors)",
        1.5,
        4.0,
        2.0,
        0.25,
        key="jt_p",
        **BOUND,
        help="p = 2: normalized GD; otherwise normalized ℓp mirror "
        "descent on W and v. The MD-Att toy selects (1, 0) at "
        "p = 2 and (0, 0) at p = 3.",
    )
    prob = view.problem_of(source)
    view.check_budget(n=prob.n, T=prob.T, d=prob.d, steps=int(steps), runs=1)
    with explained():
        study = cache.joint_preset(joint.PresetSettings(name=source, p=p, dtype=dtype, steps=steps))
    view.preset(study)
    run = study["run"]
    export_button(
        key="jt_export",
        problem=prob,
        page="Train the head too",
        run=run,
        init=study["preset"].W0,
        train={"init_v": study["preset"].v0.tolist()},
        tables={"paths": study["paths"], "summary": study["table"], "tokens": study["tokens"]},
        charts={"paths": charts.paths(study)},
    )
else:
    r = st.columns(5)
    n = r[0].number_input("n", 2, 12, 6, key="jt_n", **BOUND)
    T = r[1].number_input("T", 2, 8, 4, key="jt_T", **BOUND)
    d = r[2].number_input("d", 2, 12, 4, key="jt_d", **BOUND)
    seed = r[3].number_input("seed", 0, 10_000, 0, key="jt_seed", **BOUND)
    runs = r[4].number_input("instances", 1, 32, 8, key="jt_runs", **BOUND)
    with explained():
        s = joint.RandomSettings(n=n, T=T, d=d, seed=seed, runs=runs, steps=steps)
    view.check_budget(n=s.n, T=s.T, d=s.d, steps=s.steps, runs=s.runs)
    with explained():
        res = cache.joint_random(s)
    view.random_view(res)
    export_button(
        key="jt_export",
        problem=None,
        page="Train the head too",
        tables={"curves": res["curves"], "final": res["final"]},
        charts={"correlations": charts.corr_curves(res["curves"])},
    )
st.caption(
    f"Budget mode: {limits.mode()}. Reproduce many instances with "
    "`python -m attsvm reproduce joint-training`."
)
