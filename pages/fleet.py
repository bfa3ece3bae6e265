"""Fleet: every replica of a Prometheus diagnosed in one pass, one row each, linking to its Live view."""

import streamlit as st

from components import session
from components.boundary import error_boundary
from components.fleet_view import fleet_controls, refresh_and_render
from components.navigation import adopt_navigation
from components.refresh_picker import refresh_interval
from components.shell import t
from components.slo_picker import slo_sidebar

adopt_navigation()

st.title(t("fleet_title"))
st.caption(t("fleet_caption"))
slo = slo_sidebar()
request = None
with error_boundary("fleet"):
    request = fleet_controls()
refresh_s = refresh_interval(session.FLEET_REFRESH)


@st.fragment(run_every=refresh_s)
def _fleet() -> None:
    if request is not None:
        with error_boundary("fleet refresh"):  # a fragment rerun runs outside the page's boundary
            refresh_and_render(request, slo)


_fleet()
