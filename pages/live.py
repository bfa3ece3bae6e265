"""Live: diagnose a running server from Prometheus, its /metrics, two snapshots, or the built-in demo."""

import streamlit as st

from components import session
from components.boundary import error_boundary
from components.findings import diagnosing
from components.live_picker import apply_live_link, source_picker
from components.live_view import refresh_and_render
from components.navigation import adopt_navigation
from components.refresh_picker import refresh_interval
from components.shell import t
from components.slo_picker import slo_sidebar

adopt_navigation()

# left half-way (another source picked, the page switched), the previous diagnosis is not carried on
with diagnosing("nav_live"):
    st.title(t("live_title"))
    apply_live_link()
    slo = slo_sidebar()
    source_key, make_pair = "", None
    with error_boundary("live"):
        source_key, make_pair = source_picker(slo)
    refresh_s = refresh_interval(session.LIVE_REFRESH)

    @st.fragment(run_every=refresh_s)
    def _live() -> None:
        if make_pair is not None:
            with error_boundary("live refresh"):  # a fragment rerun runs outside the page's boundary
                refresh_and_render(make_pair, slo, source_key)

    _live()

