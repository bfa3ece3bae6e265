"""Sign-in gate and roles (issue 29): the policy from claims, and the app (AppTest) before and after sign-in."""

from __future__ import annotations

import re

import pytest
import streamlit as st

from tests.apptest_tools import new_app, texts
from tests.prom_harness import free_port
from tests.test_verify_pages import csv, upload_pair
from triage.errors import TriageError
from triage.service.access import Policy, Role

AUTH = {"redirect_uri": "http://127.0.0.1:8501/oauth2callback", "cookie_secret": "x" * 40,
        "client_id": "triage", "client_secret": "s", "server_metadata_url": "http://127.0.0.1:9/.well-known/x"}
TRIAGE = {"role_claim": "groups", "viewer": ["v"], "editor": ["e"], "admin": ["a"],
          "profile_groups": {"prod": ["team-a"], "staging": ["team-b"]}}
PAGES = ["pages/diagnose.py", "pages/live.py", "pages/fleet.py", "pages/benchmark.py", "pages/verify.py",
         "pages/retro.py", "pages/log.py", "pages/memory.py", "pages/technique.py"]


@pytest.fixture(autouse=True)
def _isolated(monkeypatch, tmp_path):
    st.cache_data.clear()
    monkeypatch.setenv("TRIAGE_LOG_DB", str(tmp_path / "log.sqlite3"))
    monkeypatch.setenv("TRIAGE_PROMETHEUS_PROD_URL", f"http://127.0.0.1:{free_port()}")
    monkeypatch.setenv("TRIAGE_PROMETHEUS_STAGING_URL", f"http://127.0.0.1:{free_port()}")


def test_roles_from_claims():
    policy = Policy.from_section(TRIAGE)
    assert policy.role({"groups": ["v"]}) is Role.VIEWER
    assert policy.role({"groups": ["v", "e"]}) is Role.EDITOR  # the highest wins
    assert policy.role({"groups": "a"}) is Role.ADMIN  # a single string claim
    assert policy.role({"groups": ["other"]}) is None and policy.role({}) is None
    assert policy.role({"groups": [{"v": 1}]}) is None  # not a string: no role
    names = ["prod", "staging", "dev"]
    assert policy.visible_profiles(names, {"groups": ["v", "team-a"]}, Role.VIEWER) == ["prod"]
    assert policy.visible_profiles(names, {"groups": ["e"]}, Role.EDITOR) == []
    assert policy.visible_profiles(names, {"groups": ["a"]}, Role.ADMIN) == names
    custom = Policy.from_section({"role_claim": "roles", "editor": "triage-rw"})
    assert custom.role({"roles": ["triage-rw"], "groups": ["a"]}) is Role.EDITOR
    with pytest.raises(TriageError, match="role_claim"):
        Policy.from_section({"role_claim": 3})
    with pytest.raises(TriageError, match="editor: must be a string or a list"):
        Policy.from_section({"editor": [1]})
    with pytest.raises(TriageError, match="allow_anonymous_demo"):
        Policy.from_section({"allow_anonymous_demo": "yes"})


def app(user: dict | None, triage: dict | None = None, auth: bool = True):
    at = new_app()
    if auth:
        at.secrets["auth"] = AUTH
    at.secrets["triage"] = triage if triage is not None else TRIAGE
    at.user = user if user is not None else {"is_logged_in": False}
    return at


def visit(at, path: str, **query: str):
    at.run()
    at.switch_page(path)
    for key, value in query.items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, at.exception
    return at


def test_without_auth_the_app_is_open_and_says_so():
    # the default page (Diagnose) without switch_page: after a switch, AppTest does not always re-run app.py,
    # whose sidebar this reads (it failed after test_app's Chinese page tests in the same process)
    at = app(None, auth=False)
    at.run()
    assert not at.exception, at.exception
    assert "open: no sign-in configured; listening on" in " ".join(c.value for c in at.sidebar.caption)
    assert at.get("plotly_chart")  # the tree is drawn


@pytest.mark.parametrize("query", [{}, {"node": "ttft.queueing"}, {"experiment": "1"}, {"profile": "prod"},
                                   {"step": "2", "lang": "zh"}, {"technique": "chunked_prefill", "id": "x"}])
def test_signed_out_only_the_sign_in_exists(query):
    at = app(None)
    for key, value in query.items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, at.exception
    shown = texts(at)
    assert "Sign in to Inference Triage" in shown or "登录推理诊断台" in shown
    assert [b.key for b in at.button] == ["auth_sign_in"]
    for kind in ("plotly_chart", "dataframe", "selectbox", "file_uploader", "metric", "download_button"):
        assert not at.get(kind), kind
    assert not re.search(r"\bprod\b", shown) and "Decision tree" not in shown and "queueing" not in shown
    for path in PAGES:  # no page is even registered before sign-in
        with pytest.raises(ValueError, match="Could not find a navigation page"):
            at.switch_page(path)


def test_anonymous_demo_opens_only_the_reference_pages():
    triage = {**TRIAGE, "allow_anonymous_demo": True}
    at = app(None, triage).run()
    assert not at.exception, at.exception
    assert at.get("plotly_chart") and "auth_sidebar_sign_in" in [b.key for b in at.button]
    at.switch_page("pages/memory.py")
    with pytest.raises(ValueError, match="Could not find a navigation page"):
        at.switch_page("pages/log.py")  # not an anonymous page: not registered


def test_signed_in_without_a_role_sees_nothing():
    at = app({"is_logged_in": True, "email": "x@example.com", "groups": ["other"]}).run()
    with pytest.raises(ValueError, match="Could not find a navigation page"):
        at.switch_page("pages/log.py")
    assert "holds no role" in " ".join(e.value for e in at.error)
    assert not at.get("dataframe") and "auth_sign_out" in [b.key for b in at.button]


def _verify_as(groups: list[str]):
    at = app({"is_logged_in": True, "email": "ed@example.com", "name": "Ed Itor", "groups": groups})
    return upload_pair(visit(at, "pages/verify.py"), csv(ttft_base=0.4, seed=1), csv(ttft_base=0.2, seed=2))


def test_a_viewer_reads_but_cannot_record():
    signed_in = app({"is_logged_in": True, "email": "ed@example.com", "name": "Ed Itor", "groups": ["v"]}).run()
    assert "Signed in as **Ed Itor** (viewer)" in " ".join(c.value for c in signed_in.caption)
    at = _verify_as(["v"])
    assert at.session_state["verify_result"] == "gain confirmed"
    assert not [b for b in at.button if b.key == "verify_save"]
    assert "recording an experiment needs the editor role" in texts(at)


def test_an_editor_records_with_created_by():
    at = _verify_as(["e"])
    at.button(key="verify_save").click().run()
    assert "Saved as experiment #1" in " ".join(s.value for s in at.success)
    from triage.verify.experiment_log import ExperimentLog

    assert ExperimentLog().get(1).created_by == "ed@example.com"


def _profiles(groups: list[str]) -> list[str]:
    at = visit(app({"is_logged_in": True, "email": "p@example.com", "groups": groups}), "pages/live.py")
    next(b for b in at.get("button_group") if b.key == "live_kind").set_value("prometheus").run()
    assert not at.exception, at.exception
    boxes = [s for s in at.selectbox if s.key == "prom_profile"]
    return list(boxes[0].options) if boxes else []


def test_profiles_only_those_granted_unless_admin():
    assert _profiles(["v", "team-a"]) == ["prod"]
    assert _profiles(["e"]) == []
    assert sorted(_profiles(["a"])) == ["prod", "staging"]
