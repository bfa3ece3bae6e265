"""Sign-in gate: with ``[auth]`` in secrets.toml every page waits for ``st.login`` (OIDC); roles and profile
grants come from the ID token's claims (triage/service/access.py). Without ``[auth]`` the app stays open.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import streamlit as st

from components import session
from components.shell import t
from triage.service.access import Policy, Role
from triage.service.model import TriageError

# url paths an anonymous visitor may open when allow_anonymous_demo = true: the tree's demo and the reference
ANONYMOUS_PAGES = frozenset({"", "memory", "technique"})


@dataclass(frozen=True)
class Access:
    auth_on: bool
    signed_in: bool
    role: Role | None
    user: str = "local"  # who recorded a row (created_by): e-mail, else username, else subject
    name: str = ""  # shown in the sidebar
    claims: Mapping[str, Any] = field(default_factory=dict)
    policy: Policy = field(default_factory=Policy)


class SecretsUnreadable(Exception):
    """secrets.toml exists but cannot be read: sign-in may be configured in it, so nothing is shown."""


def _secrets() -> Mapping[str, Any]:
    try:
        return {key: st.secrets[key] for key in ("auth", "triage") if key in st.secrets}
    except FileNotFoundError:
        return {}
    except Exception as exc:  # Streamlit raises its own error for an unparseable file: fail closed
        from pathlib import Path
        files = st.get_option("secrets.files") or []
        if any(Path(f).exists() for f in files):
            raise SecretsUnreadable(type(exc).__name__) from None
        return {}


def current() -> Access:
    """This session's access: open (no [auth]), anonymous, or a signed-in user with a role (or none)."""
    secrets = _secrets()
    policy = Policy.from_section(secrets.get("triage"))
    if "auth" not in secrets:
        return Access(auth_on=False, signed_in=False, role=Role.ADMIN, policy=policy)
    if not st.user.is_logged_in:
        return Access(auth_on=True, signed_in=False, role=None, policy=policy)
    claims = {k: st.user.get(k) for k in st.user.keys()}  # noqa: SIM118 (st.user is no plain dict)
    user = next((str(claims[k]) for k in ("email", "preferred_username", "sub") if claims.get(k)), "unknown")
    name = next((str(claims[k]) for k in ("name", "email", "preferred_username", "sub") if claims.get(k)), user)
    return Access(auth_on=True, signed_in=True, role=policy.role(claims), user=user, name=name, claims=claims,
                  policy=policy)


def can_edit() -> bool:
    """May record experiments and save Retro reports: editors and admins, or anyone when sign-in is off."""
    access = current()
    return access.role is not None and access.role >= Role.EDITOR


def visible_profiles(names: list[str]) -> list[str]:
    access = current()
    if not access.auth_on:
        return names
    if not access.signed_in:
        return []
    return access.policy.visible_profiles(names, access.claims, access.role)


def _sign_in_page() -> None:
    st.title(t("auth_title"))
    st.write(t("auth_body"))
    if st.button(t("auth_sign_in"), icon=":material/login:", type="primary", key=session.AUTH_SIGN_IN.name):
        st.login()


def _no_role_page() -> None:
    st.title(t("auth_title"))
    st.error(t("auth_no_role"))
    if st.button(t("auth_sign_out"), icon=":material/logout:", key=session.AUTH_SIGN_OUT.name):
        st.logout()


def account_sidebar() -> None:
    """Who is signed in (name, role) and a sign-out; or that the app is open; or, in the anonymous demo, a sign-in."""
    access = current()
    with st.sidebar:
        if not access.auth_on:
            address = st.get_option("server.address") or t("auth_every_interface")
            st.caption(t("auth_open", address=address))
            return
        if access.signed_in:
            role = t(f"auth_role_{access.role.name.lower()}") if access.role else t("auth_role_none")
            st.caption(t("auth_signed_in", name=access.name, role=role))
            if st.button(t("auth_sign_out"), icon=":material/logout:", key=session.AUTH_SIGN_OUT.name):
                st.logout()
        elif access.policy.allow_anonymous_demo and st.button(t("auth_sign_in"), icon=":material/login:",
                                                              key=session.AUTH_SIDEBAR_SIGN_IN.name):
            st.login()


def gate(pages: dict[str, list[Any]]) -> dict[str, list[Any]]:
    """The pages this visitor may open. When they may open none (signed out, or no role), draws the sign-in
    (or no-role) page as the only page and stops the run: no page and no data before sign-in."""
    try:
        access = current()
    except (SecretsUnreadable, TriageError) as exc:
        st.error(t("auth_secrets_broken", reason=str(exc)))
        st.stop()
    if not access.auth_on or (access.signed_in and access.role is not None):
        return pages
    if not access.signed_in and access.policy.allow_anonymous_demo:
        kept = {section: [p for p in group if p.url_path in ANONYMOUS_PAGES] for section, group in pages.items()}
        return {section: group for section, group in kept.items() if group}
    only = _no_role_page if access.signed_in else _sign_in_page
    st.navigation([st.Page(only, title=t("auth_title"), url_path="sign-in", default=True)], position="hidden").run()
    st.stop()
