"""Outgoing posts to the configured receivers: bounded in time, no redirects followed, nothing logged but the
receiver's name and the status (an incoming-webhook URL is a credential)."""

from __future__ import annotations

import json
from typing import Any

import requests

from triage.safe_text import one_line

MAX_ANSWER_BYTES = 64 * 1024


def post_json(url: str, body: dict[str, Any], timeout: float) -> str:
    """POST ``body`` as JSON; "" when the receiver took it (2xx), else one line saying why (the URL never in it)."""
    data = json.dumps(body, ensure_ascii=False).encode("utf-8")
    try:
        with requests.post(url, data=data, headers={"Content-Type": "application/json"}, timeout=timeout,
                           allow_redirects=False, stream=True) as answer:
            answer.raw.read(MAX_ANSWER_BYTES, decode_content=False)  # drain a little, never an endless body
            if 200 <= answer.status_code < 300:
                return ""
            if 300 <= answer.status_code < 400:
                return f"answered {answer.status_code} (a redirect, not followed)"
            return f"answered {answer.status_code}"
    except requests.Timeout:
        return f"no answer within {timeout:g} s"
    except requests.RequestException as exc:
        return one_line(f"not reachable ({type(exc).__name__})", 120)
