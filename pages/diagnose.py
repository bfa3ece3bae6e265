"""Diagnose (home): the clickable decision tree beside the details of the selected node."""

import streamlit as st

from components.boundary import error_boundary
from components.findings import (
    current_diagnosis,
    current_engine,
    current_highlight,
    showing_sample,
    unfinished_text,
)
from components.navigation import adopt_navigation
from components.node_panel import jump_box, node_panel
from components.shell import t
from components.tree_chart import NODE_PARAM, selected_node, tree_chart
from components.verdict import verdict_block
from triage.service.params import shown_param

adopt_navigation()


def _page() -> None:
    st.title(t("app_title"))
    st.caption(t("tagline"))

    wanted = st.query_params.get(NODE_PARAM)
    if wanted and selected_node() is None:
        st.warning(t("unknown_node", id=shown_param(wanted)))

    opened = current_diagnosis()
    if opened is None:  # a page was left before its diagnosis of new data finished: not the previous data's
        st.warning(unfinished_text(), icon=":material/hourglass_empty:")
    else:
        verdict_block(opened[1], current_engine(), opened[0], sample=showing_sample())
    highlight, note = current_highlight()
    left, right = st.columns([3, 2], gap="medium")
    with left:
        st.markdown(f"### {t('tree_heading')}")
        st.caption(t("tree_hint"))
        if note:
            st.caption(note)
        tree_chart(highlight)
    with right:
        st.markdown(f"### {t('details')}")
        jump_box(selected_node())
        with st.container(border=True):
            node_panel(selected_node())


with error_boundary("diagnose"):
    _page()
