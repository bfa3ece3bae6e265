"""Technique page: one URL per technique (``/technique?id=<id>``), the index without an id."""

import streamlit as st

from components.boundary import error_boundary
from components.navigation import adopt_navigation
from components.shell import knowledge, t
from components.technique_view import technique_index, technique_view
from triage.service.params import shown_param

adopt_navigation()


def _page() -> None:
    wanted = st.query_params.get("id")
    tech = knowledge().techniques.get(wanted) if wanted else None
    if tech is not None:
        technique_view(tech)
    else:
        if wanted:
            st.warning(t("unknown_technique", id=shown_param(wanted)))
        technique_index()


with error_boundary("technique"):
    _page()
