"""The team deployment's files (issue 29): compose.yaml, the Dockerfile and the README's secrets example.

Docker is not available where these were written, so nothing is started: the checks are structural.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

from triage.service.access import Policy, Role
from triage.store.database import is_postgres

ROOT = Path(__file__).resolve().parent.parent


def test_compose_is_valid_yaml_with_the_app_on_postgres():
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text(encoding="utf-8"))
    services = compose["services"]
    assert set(services) == {"app", "postgres", "receiver"}
    assert services["postgres"]["image"] == "postgres:15"
    app = services["app"]
    url = app["environment"]["TRIAGE_LOG_DB"]
    assert is_postgres(url) and "@postgres:5432/" in url and "${POSTGRES_PASSWORD:?" in url  # no literal password
    assert app["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert any(v.endswith(":/app/.streamlit/secrets.toml:ro") for v in app["volumes"])
    assert app["deploy"]["replicas"] >= 2
    assert all(p.startswith("127.0.0.1:") for p in app["ports"])
    receiver = services["receiver"]
    assert receiver["command"] == ["python", "-m", "triage", "webhook", "--listen", "0.0.0.0:9095"]
    # the same database as the app: incident_db defaults to a postgresql:// TRIAGE_LOG_DB, so the Retro page
    # of every replica lists what the receiver stored
    assert receiver["environment"]["TRIAGE_LOG_DB"] == url
    assert receiver["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert receiver["volumes"] == app["volumes"] and all(p.startswith("127.0.0.1:") for p in receiver["ports"])


def test_dockerfile_copies_files_that_exist_and_never_the_secrets():
    text = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    sources = [line.split()[1] for line in text.splitlines() if line.startswith("COPY ")]
    assert sources and all((ROOT / s).exists() for s in sources), sources
    assert "secrets.toml" not in " ".join(sources)
    assert ".streamlit/secrets.toml" in (ROOT / ".dockerignore").read_text(encoding="utf-8")


def test_readme_secrets_example_parses_into_the_roles_it_describes():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Deployment for a team", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```toml\n(.*?)```", section, re.S)
    assert block
    secrets = tomllib.loads(block.group(1))
    assert {"redirect_uri", "cookie_secret", "client_id", "client_secret", "server_metadata_url"} <= set(
        secrets["auth"])
    policy = Policy.from_section(secrets["triage"])
    assert policy.role({"groups": ["triage-editors"]}) is Role.EDITOR
    assert policy.visible_profiles(["prod", "dev"], {"groups": ["team-inference"]}, Role.VIEWER) == ["prod"]
