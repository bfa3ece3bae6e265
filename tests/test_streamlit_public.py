"""What the app relies on from Streamlit's public behaviour instead of its internals (issue 25)."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest


def _bounded_control_flow() -> None:
    import streamlit as st

    from components.boundary import error_boundary

    runs = st.session_state.get("runs", 0) + 1
    st.session_state["runs"] = runs
    with error_boundary("control flow"):
        if runs == 1:
            st.rerun()
        st.markdown(f"run {runs}")
        st.stop()
    st.markdown("after the boundary")


def test_rerun_and_stop_pass_through_the_error_boundary(monkeypatch):
    """st.rerun and st.stop raise BaseExceptions: the boundary's ``except Exception`` lets them through without
    naming Streamlit's internal exception classes."""
    monkeypatch.delenv("TRIAGE_DEBUG", raising=False)  # the boundary as a visitor meets it: nothing re-raised
    at = AppTest.from_function(_bounded_control_flow).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert [m.value for m in at.markdown] == ["run 2"]  # the rerun happened, the stop stopped
    assert at.session_state["runs"] == 2
