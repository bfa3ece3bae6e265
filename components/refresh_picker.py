"""The sidebar's refresh interval for a page that redraws itself on a timer (Live, Fleet)."""

from __future__ import annotations

import streamlit as st

from components import session
from components.shell import t, translated_choice

INTERVALS_S = (5, 10, 15, 30, 60)
DEFAULT_S = 15


def refresh_interval(widget: session.Widget[int]) -> int:
    """Seconds between redraws, one click to change: a segmented control (a slider would make the browser
    load its slider and date-formatting code before the page's first chart). The choice is kept in the session:
    a page switch drops the widget's state, and the page comes back with the interval chosen before."""
    kept = session.REFRESH_KEPT.setdefault(dict)
    if not widget.present() and widget.name in kept:
        widget.seed(kept[widget.name])
    choice = translated_choice(st.sidebar.segmented_control, t("live_refresh"), INTERVALS_S, widget,
                               lambda s: t("refresh_every_s", n=s), default=DEFAULT_S, required=True)
    seconds = int(choice if choice is not None else DEFAULT_S)
    kept[widget.name] = seconds
    return seconds
