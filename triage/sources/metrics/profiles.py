"""Named Prometheus profiles from .streamlit/secrets.toml and TRIAGE_PROMETHEUS_* variables; secrets never shown."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

from triage import safe_load
from triage.errors import TriageError
from triage.safe_text import redact_url

__all__ = ["Profile", "get_profile", "list_profiles", "profile_for_url", "redact_url", "resolve_profile"]

ENV_PREFIX = "TRIAGE_PROMETHEUS_"
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
# longest first, so NAME_VERIFY_TLS is not read as a profile called NAME_VERIFY with a key TLS
ENV_KEYS = ("_VERIFY_TLS", "_USERNAME", "_PASSWORD", "_TIMEOUT", "_TOKEN", "_URL")
SECRET_FIELDS = ("token", "password")
TRUE_WORDS = {"1", "true", "yes", "on"}
FALSE_WORDS = {"0", "false", "no", "off"}
DEFAULT_SECRETS = (Path.home() / ".streamlit" / "secrets.toml", Path(".streamlit") / "secrets.toml")


@dataclass(frozen=True)
class Profile:
    """How to reach one Prometheus. ``repr`` shows the URL and which credentials are set, never their values."""

    name: str
    url: str
    token: str = field(default="", repr=False)
    username: str = ""
    password: str = field(default="", repr=False)
    headers: dict[str, str] = field(default_factory=dict, repr=False)
    verify_tls: bool = True
    timeout: float | None = None

    def __repr__(self) -> str:
        auth = "bearer token" if self.token else "basic auth" if self.username else "no auth"
        extra = f", headers={sorted(self.headers)}" if self.headers else ""
        return (f"Profile(name={self.name!r}, url={redact_url(self.url)!r}, auth={auth}{extra}, "
                f"verify_tls={self.verify_tls}, timeout={self.timeout})")

    __str__ = __repr__

    def label(self) -> str:
        """How messages name it: "profile 'prod'", or the URL for an ad-hoc profile."""
        return f"profile '{self.name}'" if self.name else redact_url(self.url)

    def request_headers(self) -> dict[str, str]:
        """Extra headers plus ``Authorization: Bearer …`` when a token is set."""
        headers = dict(self.headers)
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        return headers

    def auth(self) -> tuple[str, str] | None:
        return (self.username, self.password) if self.username else None


def profile_for_url(url: str) -> Profile:
    """An unnamed profile for a URL; credentials in its ``user:password@`` become basic auth and leave the URL,
    so nothing downstream can print them."""
    url = _check_url(url.strip(), "url")
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return Profile(name="", url=url)
    host = parts.netloc.rsplit("@", 1)[1]
    return Profile(name="", url=urlunsplit(parts._replace(netloc=host)), username=unquote(parts.username or ""),
                   password=unquote(parts.password or ""))


def resolve_profile(text: str, secrets_path: str | Path | None = None,
                    env: Mapping[str, str] | None = None) -> Profile:
    """``--prometheus`` as given: a URL, or the name of a profile in secrets.toml / TRIAGE_PROMETHEUS_<NAME>_*."""
    text = text.strip()
    if "://" in text:
        return profile_for_url(text)
    if not NAME_RE.match(text):
        raise TriageError("give a URL (http://host:9090) or a profile name from .streamlit/secrets.toml or "
                          f"{ENV_PREFIX}<NAME>_URL", key="--prometheus")
    profiles = list_profiles(secrets_path, env)
    if text not in profiles and text.lower() in profiles:
        text = text.lower()
    return get_profile(text, secrets_path, env) if text not in profiles else profiles[text]


def list_profiles(secrets_path: str | Path | None = None, env: Mapping[str, str] | None = None) -> dict[str, Profile]:
    """Profiles by name: secrets tables first, then environment variables (which win, field by field).

    Without ``secrets_path`` both ~/.streamlit/secrets.toml and ./.streamlit/secrets.toml are read (the project
    file wins), as Streamlit does."""
    paths = [Path(secrets_path)] if secrets_path is not None else [p for p in DEFAULT_SECRETS if p.is_file()]
    raw: dict[str, dict[str, Any]] = {}
    for path in paths:
        for name, table in _secrets_tables(path).items():
            raw.setdefault(name, {}).update(table)
    where: dict[str, str] = {name: str(paths[-1]) for name in raw}
    for name, values in _env_tables(os.environ if env is None else env).items():
        raw.setdefault(name, {}).update(values)
        where[name] = f"{ENV_PREFIX}{name.upper()}_*"
    return {name: _build(name, raw[name], where[name]) for name in sorted(raw)}


def get_profile(name: str, secrets_path: str | Path | None = None, env: Mapping[str, str] | None = None) -> Profile:
    profiles = list_profiles(secrets_path, env)
    if name not in profiles:
        known = ", ".join(profiles) or "none configured"
        raise TriageError(f"no Prometheus profile '{name}' (known: {known})", key="profile")
    return profiles[name]


def _secrets_tables(path: Path) -> dict[str, dict[str, Any]]:
    if not path.is_file():
        raise TriageError("secrets file not found", where=str(path))
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TriageError(f"cannot read as UTF-8 text ({exc})", where=str(path)) from None
    data = safe_load.load_toml(text, where=str(path))
    section = data.get("prometheus", {})
    if not isinstance(section, dict):
        raise TriageError("[prometheus] must be a table of profiles", where=str(path), key="prometheus")
    tables = {}
    for name, table in section.items():
        if not isinstance(table, dict):
            raise TriageError("must be a table like [prometheus.NAME] with url = …", where=str(path),
                              key=f"prometheus.{name}")
        tables[name] = dict(table)
    return tables


def _env_tables(env: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    tables: dict[str, dict[str, Any]] = {}
    for key, value in env.items():
        if not key.startswith(ENV_PREFIX):
            continue
        rest = key[len(ENV_PREFIX):]
        suffix = next((s for s in ENV_KEYS if rest.endswith(s) and len(rest) > len(s)), None)
        if suffix:
            tables.setdefault(rest[: -len(suffix)].lower(), {})[suffix[1:].lower()] = value
    return tables


def _build(name: str, table: dict[str, Any], where: str) -> Profile:
    known = {f.name for f in fields(Profile)} - {"name"}
    unknown = sorted(set(table) - known)
    if unknown:
        raise TriageError(f"unknown key(s) {', '.join(unknown)}; use {', '.join(sorted(known))}", where=where,
                          key=f"prometheus.{name}")
    key = f"prometheus.{name}"
    return Profile(
        name=name,
        url=_check_url(str(table.get("url", "")).strip(), f"{key}.url", where),
        token=_text(table, "token", key, where),
        username=_text(table, "username", key, where),
        password=_text(table, "password", key, where),
        headers=_headers(table.get("headers", {}), key, where),
        verify_tls=_flag(table.get("verify_tls", True), f"{key}.verify_tls", where),
        timeout=_seconds(table.get("timeout"), f"{key}.timeout", where),
    )


def _check_url(url: str, key: str, where: str = "") -> str:
    if not url:
        raise TriageError("a Prometheus URL is required", where=where, key=key)
    if not url.startswith(("http://", "https://")):
        raise TriageError(f"'{redact_url(url)[:80]}' must start with http:// or https://", where=where, key=key)
    return url


def _text(table: dict[str, Any], name: str, key: str, where: str) -> str:
    value = table.get(name, "")
    if not isinstance(value, str):
        raise TriageError("must be a string", where=where, key=f"{key}.{name}")  # the value is never echoed
    return value


def _headers(value: Any, key: str, where: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise TriageError("must be a table of strings, e.g. headers = { X-Scope-OrgID = \"team\" }", where=where,
                          key=f"{key}.headers")
    return {str(k): v for k, v in value.items()}


def _flag(value: Any, key: str, where: str) -> bool:
    if isinstance(value, bool):
        return value
    word = str(value).strip().lower()
    if word in TRUE_WORDS | FALSE_WORDS:
        return word in TRUE_WORDS
    raise TriageError(f"must be true or false, got '{value}'", where=where, key=key)


def _seconds(value: Any, key: str, where: str) -> float | None:
    if value is None or value == "":
        return None
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = float("nan")
    if not seconds > 0:
        raise TriageError(f"must be a positive number of seconds, got '{value}'", where=where, key=key)
    return seconds
