"""Overview page: the claims, links to every page, the backend in use."""

from conftest import open_page, texts


def test_overview_lists_claims_links_and_backend():
    at = open_page(None)  # the default page
    t = texts(at)
    assert "Transformers as Support Vector Machines" in at.title[0].value
    assert len(at.main.get("page_link")) == 8  # one per claim, and the tour
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["JAX backend"] in {"CPU", "GPU", "TPU", "CUDA", "ROCM", "METAL"}
    assert metrics["float64"] == "on"
    assert "0-based" in t


def test_sidebar_page_links_carry_the_shared_settings():
    at = open_page(None, query={"seed": 5, "geo_src": "geometry-2"})
    links = at.sidebar.get("page_link")
    assert len(links) >= 8
    for link in links:
        assert link.proto.query_string == "seed=5"  # geo_src is page-specific: stays


def test_sidebar_is_shared_and_survives_bad_url_values():
    # An out-of-range URL value is ignored by the bound widget, not passed to the library.
    at = open_page(None, query={"n": 100000, "d": "abc", "head": "nope"})
    assert at.number_input(key="n").value == 6
    assert at.number_input(key="d").value == 10
    assert at.selectbox(key="head").value == "linear"
