"""Inference Triage entry point: routes pages with st.navigation and draws the shared sidebar."""

from pathlib import Path

import pandas  # noqa: F401  # imported first: a lazy import racing plotly across sessions breaks it
import streamlit as st

from components.auth import account_sidebar, gate
from components.boundary import error_boundary
from components.chart_code import ChartCodeWarmup
from components.shell import sidebar, t
from triage.service.windows import warm_demo


@st.cache_resource(show_spinner=False)
def _warm_once() -> bool:
    """Once per server process: the Live demo's default engines start simulating their history now."""
    warm_demo()
    return True


_warm_once()

# the icon is a file served by the app: a Material Symbols name made every page fetch its favicon from
# fonts.gstatic.com (a third-party request per visitor; tests/test_browser_offline.py)
PAGE_ICON = str(Path(__file__).resolve().parent / "assets" / "page_icon.png")
st.set_page_config(page_title="Inference Triage", page_icon=PAGE_ICON, layout="wide")

pages = {
    t("nav_section_main"): [
        st.Page("pages/diagnose.py", title=t("nav_diagnose"), icon=":material/account_tree:", default=True),
        st.Page("pages/live.py", title=t("nav_live"), icon=":material/monitor_heart:"),
        st.Page("pages/fleet.py", title=t("nav_fleet"), icon=":material/dns:"),
        st.Page("pages/benchmark.py", title=t("nav_benchmark"), icon=":material/upload_file:"),
        st.Page("pages/verify.py", title=t("nav_verify"), icon=":material/compare_arrows:"),
        st.Page("pages/retro.py", title=t("nav_retro"), icon=":material/checklist:"),
        st.Page("pages/log.py", title=t("nav_log"), icon=":material/history:"),
    ],
    t("nav_section_reference"): [
        st.Page("pages/memory.py", title=t("nav_memory"), icon=":material/memory:"),
        st.Page("pages/technique.py", title=t("nav_techniques"), icon=":material/menu_book:"),
    ],
}
# url paths of the pages whose first paint is a chart ("" is the default page, Diagnose)
CHART_FIRST = {"", "live", "benchmark", "memory"}
navigation = st.navigation(gate(pages))  # with [auth] in secrets.toml: nothing before sign-in
chart_code = ChartCodeWarmup()
if navigation.url_path in CHART_FIRST:
    chart_code.draw()  # first, so the browser fetches the chart code while the page below computes
sidebar()
account_sidebar()
with error_boundary(navigation.url_path or "home"):  # no traceback ever reaches a visitor
    navigation.run()
chart_code.draw()  # a page that shows text first: once its text is sent
