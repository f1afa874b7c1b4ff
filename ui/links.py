"""Link parameters are untrusted: the rules every value must pass before any widget reads it.

Pure functions (no Streamlit), used by `ui.hosted.clean_link`, which applies them to the URL
of every run before the sidebar and the page draw a single widget. Ranges and choices stay
with each widget (its own min, max and options are the one definition); what is checked
here is what no widget can survive or should ever parse: numbers beyond float range (a
bound integer widget raises OverflowError on them inside Streamlit), numbers too large to
be any setting, runs of text long enough to cost time, and links with thousands of
parameters.
"""

from __future__ import annotations

import math

from . import linkdata

MAX_PARAMS = 64  # parameters one link may carry (the app uses about 30 at most)
MAX_CHARS = 1_000  # characters of one value (a literal setting is capped at 500)
LONG_VALUES = {
    "geo_data": linkdata.MAX_CHARS,  # values that carry data, with their caps
    "words_text": 6_000,  # typed sentences (attsvm.limits.TEXT_CAPS)
    "pt_text": 2_000,
}  # the real transformer's typed sentences
MAX_NUMBER = 2.0**53  # beyond this no setting is meant, and int/float round-trips fail


def refusal(key: str, value, *, position: int = 0) -> str | None:
    """Why the link value `value` of parameter `key` must be dropped, or None to keep it.

    Args:
        key: the parameter's name.
        value: its text (or list of texts, for a repeated parameter).
        position: its place among the link's parameters (0-based).
    """
    if position >= MAX_PARAMS:
        return f"more than {MAX_PARAMS} parameters in the link"
    if len(key) > 100:
        return "a parameter name longer than 100 characters"
    values = value if isinstance(value, list) else [value]
    if len(values) > MAX_PARAMS:
        return f"repeated more than {MAX_PARAMS} times"
    cap = LONG_VALUES.get(key, MAX_CHARS)
    for v in values:
        if not isinstance(v, str):
            return "not text"
        if len(v) > cap:
            return f"longer than {cap:,} characters"
        try:
            x = float(v)
        except (ValueError, OverflowError):
            continue  # text: the widget that reads it checks it
        if not math.isfinite(x):
            return "not a finite number"
        if abs(x) > MAX_NUMBER:
            return "a number beyond ±2⁵³"
    return None


def same_value(state, url) -> bool:
    """Whether a widget's value `state` is what the link's `url` text asked for (Streamlit
    removes a bound parameter whose value equals the widget's default, so a parameter that
    is gone from the URL may still have been used)."""
    if isinstance(url, list):
        if not isinstance(state, (list, tuple)) or len(state) != len(url):
            return False
        return all(same_value(s, u) for s, u in zip(state, url, strict=True))
    if isinstance(state, (list, tuple)):
        return len(state) == 1 and same_value(state[0], url)
    text = str(url).strip()
    if isinstance(state, bool):
        return text.lower() == str(state).lower()
    if isinstance(state, (int, float)):
        try:
            return float(text) == float(state)
        except (ValueError, OverflowError):
            return False
    return text == str(state)
