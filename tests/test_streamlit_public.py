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


def _uploader_that_reads() -> None:
    import streamlit as st
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    upload = st.file_uploader("file", key="file")
    ctx = get_script_run_ctx()
    if upload is not None and ctx is not None:
        upload.read()
        st.session_state["file_id"] = upload.file_id
    if ctx is not None and "file_id" in st.session_state:
        held = ctx.uploaded_file_mgr.get_files(ctx.session_id, [st.session_state["file_id"]])
        st.session_state["held"] = sum(len(f.data) for f in held)


def test_streamlit_keeps_an_upload_on_the_server_until_released():
    """Why components/upload_store.release calls the upload manager's remove_file: Streamlit 1.67 keeps an upload's
    bytes on the server for the whole session after the script read them, and has no public call to drop them.
    When this fails, Streamlit releases them itself: release() need only empty the script's copies."""
    at = AppTest.from_function(_uploader_that_reads)
    at.run()
    at.file_uploader(key="file").upload("run.csv", b"x" * 4096, "text/csv").run()
    at.run()  # a later run of the session, nothing new uploaded
    assert not at.exception
    assert at.session_state["held"] == 4096
