"""Who may do what once sign-in is on: roles (viewer < editor < admin) and Prometheus profile grants from the
identity token's claims, configured under ``[triage]`` in secrets.toml. Pure: no Streamlit here.

```toml
[triage]
role_claim = "groups"                 # the ID-token claim holding a string or a list of strings
viewer = ["triage-viewers"]           # claim values granting each role; the highest role matched wins
editor = ["triage-editors"]
admin = ["triage-admins"]
allow_anonymous_demo = false          # true: the reference pages and the demo before sign-in
[triage.profile_groups]               # which claim values may use which Prometheus profile (admins: every one)
prod = ["team-inference"]
```
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from triage.errors import TriageError


class Role(IntEnum):
    """Ordered: each role can do everything the one below can."""

    VIEWER = 1  # reads every page, the log and its CSV
    EDITOR = 2  # also records experiments and saves Retro reports
    ADMIN = 3  # also sees every Prometheus profile, granted to a group or not


DEFAULTS = {"role_claim": "groups", "viewer": ["triage-viewers"], "editor": ["triage-editors"],
            "admin": ["triage-admins"]}


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise TriageError("must be a string or a list of strings", where="secrets.toml [triage]", key=where)


@dataclass(frozen=True)
class Policy:
    role_claim: str = "groups"
    values: Mapping[Role, tuple[str, ...]] = field(default_factory=dict)
    profile_groups: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    allow_anonymous_demo: bool = False

    @classmethod
    def from_section(cls, section: Mapping[str, Any] | None) -> Policy:
        """The ``[triage]`` table (missing keys take DEFAULTS); a wrong type is a TriageError naming the key."""
        data = {**DEFAULTS, **dict(section or {})}
        claim = data["role_claim"]
        if not isinstance(claim, str) or not claim:
            raise TriageError("must be a claim name", where="secrets.toml [triage]", key="role_claim")
        anonymous = data.get("allow_anonymous_demo", False)
        if not isinstance(anonymous, bool):
            raise TriageError("must be true or false", where="secrets.toml [triage]", key="allow_anonymous_demo")
        grants = data.get("profile_groups") or {}
        if not isinstance(grants, Mapping):
            raise TriageError("must be a table of profile = [groups]", where="secrets.toml [triage]",
                              key="profile_groups")
        return cls(role_claim=claim,
                   values={role: _strings(data[role.name.lower()], role.name.lower()) for role in Role},
                   profile_groups={str(k): _strings(v, f"profile_groups.{k}") for k, v in grants.items()},
                   allow_anonymous_demo=anonymous)

    def claim_values(self, claims: Mapping[str, Any]) -> set[str]:
        raw = claims.get(self.role_claim)
        if isinstance(raw, str):
            return {raw}
        if isinstance(raw, list | tuple):
            return {v for v in raw if isinstance(v, str)}
        return set()

    def role(self, claims: Mapping[str, Any]) -> Role | None:
        """The highest role any of the user's claim values grants; None: signed in, but no role here."""
        mine = self.claim_values(claims)
        granted = [role for role, values in self.values.items() if mine.intersection(values)]
        return max(granted) if granted else None

    def visible_profiles(self, names: Iterable[str], claims: Mapping[str, Any], role: Role | None) -> list[str]:
        """Admins: every profile. Others: only those granted to one of their claim values."""
        if role is Role.ADMIN:
            return list(names)
        mine = self.claim_values(claims)
        return [n for n in names if mine.intersection(self.profile_groups.get(n, ()))]
