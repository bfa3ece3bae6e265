"""Sign-in through a real OIDC provider (oidc-provider-mock on a free port) in Debian Chromium (issue 29): nothing
before sign-in from any page or query parameter; a viewer reads but cannot record; an editor records; sign-out."""

from __future__ import annotations

import json
import os
import shutil
import urllib.request
from pathlib import Path

import pytest

from tests.browser_tools import ROOT, after_rerun, chromium_page, script_finished, streamlit_server
from tests.prom_harness import free_port
from tests.test_experiment_log import entry
from triage.verify.experiment_log import ExperimentLog

pytestmark = pytest.mark.browser

SECRET_NOTE = "note-only-for-the-team-7f3a"
PROM_HOST = "prom-internal-9c1e.example.invalid"
PROM_TOKEN = "tok-never-in-browser-55aa"
USERS = {"vera": {"name": "Vera Viewer", "email": "vera@example.com", "groups": ["triage-viewers"]},
         "ed": {"name": "Ed Editor", "email": "ed@example.com", "groups": ["triage-editors", "team-inference"]}}
GATED = ["/", "/?node=ttft.queueing", "/live", "/live?profile=prod", "/fleet", "/benchmark", "/verify",
         "/verify?experiment=1", "/retro?step=3", "/log", "/memory", "/technique?id=chunked_prefill",
         "/no-such-page"]


def _expect():
    from playwright.sync_api import expect

    return expect


def app_dir(tmp: Path, provider: str) -> Path:
    """This app in a folder of its own whose .streamlit/secrets.toml configures sign-in against ``provider``."""
    tmp.mkdir()
    for name in ("app.py", "pages", "components", "triage", "tree", "assets"):
        (tmp / name).symlink_to(ROOT / name)
    (tmp / ".streamlit").mkdir()
    shutil.copy(ROOT / ".streamlit" / "config.toml", tmp / ".streamlit" / "config.toml")
    (tmp / ".streamlit" / "secrets.toml").write_text(f"""
[auth]
redirect_uri = "http://127.0.0.1:{{port}}/oauth2callback"
cookie_secret = "{os.urandom(16).hex()}"
client_id = "inference-triage"
client_secret = "client-secret-not-checked-by-the-mock"
server_metadata_url = "{provider}/.well-known/openid-configuration"

[triage]
role_claim = "groups"
viewer = ["triage-viewers"]
editor = ["triage-editors"]
admin = ["triage-admins"]
[triage.profile_groups]
prod = ["team-inference"]

[prometheus.prod]
url = "https://{PROM_HOST}"
token = "{PROM_TOKEN}"
""", encoding="utf-8")
    return tmp


def _csvs(tmp: Path) -> tuple[Path, Path]:
    from tests.synthetic import requests

    cols = ["start_s", "prompt_tokens", "output_tokens", "ttft_s", "e2e_s", "ok"]
    base, cand = tmp / "baseline.csv", tmp / "candidate.csv"
    requests(n=1500, ttft_base=0.4, seed=1)[cols].to_csv(base, index=False)
    requests(n=1500, ttft_base=0.2, seed=2)[cols].to_csv(cand, index=False)
    return base, cand


def _nothing_shown(page, url: str) -> None:
    expect = _expect()
    for path in GATED:
        page.goto(url + path)
        expect(page.get_by_text("Sign in to Inference Triage")).to_be_visible(timeout=60000)
        body = page.locator("body").inner_text()
        for leak in (SECRET_NOTE, PROM_HOST, PROM_TOKEN, "Decision tree", "Experiment log", "Signed in as"):
            assert leak not in body, (path, leak)
        assert page.locator("[data-testid=stSidebarNav]").count() == 0
        assert page.locator(".js-plotly-plot, [data-testid=stDataFrame], [data-testid=stFileUploader]").count() == 0
    assert PROM_TOKEN not in page.content() and PROM_HOST not in page.content()


def _sign_in(page, url: str, sub: str, name: str, role: str) -> None:
    expect = _expect()
    page.goto(url)
    page.get_by_role("button", name="Sign in").click()
    page.locator("input[name=sub]").fill(sub)  # the provider's own form
    page.get_by_role("button", name="Authorize").click()
    expect(page.get_by_text(f"Signed in as {name} ({role})")).to_be_visible(timeout=60000)


def _sign_out(page, url: str) -> None:
    expect = _expect()
    page.get_by_role("button", name="Sign out").click()
    end = page.get_by_role("button", name="End session")  # the provider's RP-initiated logout confirmation
    end.wait_for(timeout=30000)
    end.click()
    expect(page.get_by_text("Sign in to Inference Triage")).to_be_visible(timeout=60000)


def _verify(page, url: str, base: Path, cand: Path) -> None:
    expect = _expect()
    page.goto(f"{url}/verify")
    expect(page.locator(".st-key-verify_base input[type=file]")).to_be_attached(timeout=60000)
    after_rerun(page, lambda: page.locator(".st-key-verify_base input[type=file]").set_input_files(str(base)))
    page.locator(".st-key-verify_cand input[type=file]").set_input_files(str(cand))
    expect(page.get_by_text("Overall: gain confirmed")).to_be_visible(timeout=60000)
    script_finished(page)  # the save button, or the note that the role may not save, follows the verdict


def test_sign_in_as_viewer_and_editor_through_a_real_provider(tmp_path):
    from oidc_provider_mock import run_server_in_thread

    expect = _expect()
    db = tmp_path / "log.sqlite3"
    ExperimentLog(db).save(entry(note=SECRET_NOTE, who="oncall"))
    base, cand = _csvs(tmp_path)
    with run_server_in_thread(port=free_port()) as oidc:
        provider = f"http://127.0.0.1:{oidc.server_port}"
        for sub, claims in USERS.items():
            request = urllib.request.Request(f"{provider}/users/{sub}", data=json.dumps(claims).encode(),
                                             method="PUT", headers={"Content-Type": "application/json"})
            assert urllib.request.urlopen(request, timeout=10).status == 204
        folder = app_dir(tmp_path / "app", provider)
        env = {"TRIAGE_LOG_DB": str(db)}
        with streamlit_server(env, cwd=folder) as url, chromium_page() as page:
            _nothing_shown(page, url)

            _sign_in(page, url, "vera", "Vera Viewer", "viewer")
            page.goto(f"{url}/verify?experiment=1")
            expect(page.get_by_text("#1").first).to_be_visible(timeout=60000)
            _verify(page, url, base, cand)
            expect(page.get_by_text("recording an experiment needs the editor role")).to_be_visible()
            assert page.locator(".st-key-verify_save button").count() == 0
            page.goto(f"{url}/live")
            expect(page.get_by_text("Signed in as Vera Viewer (viewer)")).to_be_visible(timeout=60000)
            assert PROM_HOST not in page.content() and PROM_TOKEN not in page.content()
            _sign_out(page, url)
            _nothing_shown(page, url)

            _sign_in(page, url, "ed", "Ed Editor", "editor")
            _verify(page, url, base, cand)
            page.locator(".st-key-verify_save button").click()
            expect(page.get_by_text("Saved as experiment #2")).to_be_visible(timeout=60000)
            assert PROM_HOST not in page.content() and PROM_TOKEN not in page.content()
            _sign_out(page, url)
            _nothing_shown(page, url)
    saved = ExperimentLog(db).get(2)
    assert saved.created_by == "ed@example.com" and saved.overall == "gain confirmed"
    assert ExperimentLog(db).get(1).note == SECRET_NOTE
