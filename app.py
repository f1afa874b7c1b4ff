"""attsvm explorer: page config, the shared sidebar and the page list (nothing else).

Run with `streamlit run app.py`. Every page is one short file in app_pages/. (Not pages/:
Streamlit reads a pages/ folder beside this script as its legacy multipage layout until a
run reaches st.navigation, and a fresh server's first deep link then says "Page not found".)
"""

import os
from pathlib import Path

# A shared server: JAX must not reserve most of a GPU at start (set before jax is imported).
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
# A long-running server keeps glibc's default allocator (`attsvm.runtime.keep_freed_memory`),
# and so does the results store's filler it starts (`attsvm.runtime.configure` reads this).
os.environ.setdefault("ATTSVM_MALLOC", "system")

import streamlit as st  # noqa: E402

st.set_page_config(
    page_title="attsvm — Transformers as SVMs", page_icon=":material/hub:", layout="wide"
)

# (file in app_pages/, title, icon, url)
PAGES = [
    ("overview.py", "Overview", "home", None),
    ("tour.py", "Start here: guided tour", "tour", "start-here"),
    ("playground.py", "Token selection (live)", "play_circle", "token-selection"),
    ("geometry.py", "Geometry in 2-D", "scatter_plot", "geometry-2d"),
    ("basins.py", "Local optima and basins", "landscape", "local-optima"),
    ("overparam.py", "Over-parameterization", "trending_up", "over-parameterization"),
    ("rank.py", "Rank collapse", "compress", "rank-collapse"),
    ("staircase.py", "Rank from small init", "stairs", "small-init-rank"),
    ("nonlinear.py", "Nonlinear heads", "extension", "nonlinear-heads"),
    ("sequences.py", "Sequences and causal attention", "link", "causal-attention"),
    ("ntp.py", "Next-token prediction", "account_tree", "next-token"),
    ("optimizers.py", "Optimizer → norm", "speed", "optimizer-norm"),
    ("joint.py", "Train the head too", "join_inner", "train-the-head"),
    ("hierarchy.py", "Deeper: a hierarchy of SVMs", "stacks", "hierarchy-of-svms"),
    ("words.py", "Real words", "translate", "real-words"),
    ("pretrained.py", "A real transformer", "neurology", "a-real-transformer"),
    ("reproduce.py", "Reproduce the paper", "description", "paper-figures"),
]
here = Path(__file__).parent
by_file = {
    file: st.Page(
        f"app_pages/{file}",
        title=title,
        icon=f":material/{icon}:",
        url_path=url,
        default=url is None,
    )
    for file, title, icon, url in PAGES
    if (here / "app_pages" / file).exists()
}
pages = list(by_file.values())
# The sidebar draws the page links itself so that they carry the settings in the URL.
page = st.navigation(pages, position="hidden")

from attsvm import runtime  # noqa: E402  (imports JAX)

runtime.configure()  # every core; programs outlive the server process

from ui import hosted, results, sidebar, tour  # noqa: E402

hosted.load_secrets_mode()
results.start_filler()  # the Reproduce page's results (attsvm.store)
link = hosted.clean_link()
sidebar.render(pages, page=page.url_path)
tour.banner(by_file)
note = st.sidebar.empty()  # the "ignored link parameters" note, if any
hosted.show_refused(note, page=page.url_path)
complete = False  # the page drew everything (no stop, no rerun)
try:
    with results.page_running():  # the background filler waits meanwhile
        page.run()
    complete = True
finally:
    hosted.report_ignored_params(link, page=page.url_path, box=note, complete=complete)
