"""Text that is safe to show: URLs without secrets, no terminal control characters, Markdown made literal.

Every output path (CLI text/JSON/Markdown, pages, logs) runs user- or server-supplied text through these.
"""

from __future__ import annotations

import logging
import re
import traceback
import unicodedata
from typing import Any
from urllib.parse import parse_qsl, quote, urlsplit, urlunsplit

MASK = "***"
# query parameter names whose values are secrets (matched as a whole word part: access_token, X-Api-Key, pwd …)
SECRET_PARAM_RE = re.compile(r"(^|[_\-.])(token|password|passwd|pwd|pass|secret|key|apikey|auth|authorization|"
                             r"signature|sig|credential|credentials|session|sessionid|jwt|bearer)$|^(access|refresh|"
                             r"id|api|private|client)[_\-.]?(token|key|secret)$", re.I)
QUERY_PAIR_RE = re.compile(r"(?<=[?&;])([A-Za-z0-9_.\-]{1,64})=([^&;\s\"'#<>]*)")
URL_IN_TEXT_RE = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.\-]{1,15}://[^\s'\"<>`]+")
SCHEME_RE = re.compile(r"\s*[A-Za-z][A-Za-z0-9+.\-]{0,15}://")
AUTHORITY_END_RE = re.compile(r"[?#\s]")
# name:secret@host in free text without a scheme (the scheme-ful ones are URL_IN_TEXT_RE's): the user name
# starts a word, the secret may hold anything but space and quotes, up to the last @ before a host
BARE_USERINFO_RE = re.compile(r"(^|[\s'\"(<\[=,])(?![A-Za-z][A-Za-z0-9+.\-]{0,15}://)[\w.~%+!$&*\-]+:[^\s'\"<>`]*@"
                              r"(?=[\w\[])")
# C0/C1 controls, DEL and the bidi overrides that can disguise text on a terminal; tab and newline stay
CONTROL_RE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
ANSI_RE = re.compile(r"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)?|[@-Z\\-_])")
# invisible characters that can sit in front of a formula: zero-width spaces and joiners, word joiner, BOM, soft
# hyphen, Arabic letter mark and every bidi mark, embedding, override and isolate
INVISIBLE_RE = re.compile("[\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]")
# OWASP's = + - @ tab CR, plus what spreadsheets also act on: a leading space or newline, a pipe (DDE), a percent,
# and the full-width and small forms of = + - @ that some spreadsheet apps fold to ASCII
CSV_FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "\n", " ", "|", "%", "\uff1d", "\uff0b", "\uff0d", "\uff20",
                     "\ufe66", "\ufe62", "\ufe63", "\ufe6b", "\u3000")
MD_SPECIAL_RE = re.compile(r"([\\`*_{}\[\]()<>#!|~:$=@^&])")
AUTOLINK_RE = re.compile(r"://|\b[wW]{3}\.|@")
ZWSP = "\u200b"


def secret_param(name: str) -> bool:
    return bool(SECRET_PARAM_RE.search(name.strip()))


def redact_url(url: str) -> str:
    """``url`` with its userinfo and secret-looking query values replaced by ``***``.

    ``https://user:pw@host/m?token=abc&x=1`` → ``https://***@host/m?token=***&x=1``. The userinfo is masked on the
    raw text first, so a URL that does not parse cleanly keeps no secret either: ``user:pw@host:9/m`` (no
    scheme, which urllib reads as scheme ``user``) and ``http://user:pw/x@host`` (a ``/`` in the password, which
    urllib reads as host ``user`` and port ``pw``) both become ``***@host…``."""
    masked = mask_userinfo(url)
    try:
        parts = urlsplit(masked)
    except ValueError:
        return redact_query_pairs(masked)
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(secret_param(k) for k, _ in pairs):
            query = "&".join(f"{quote(k, safe='')}={MASK if secret_param(k) else quote(v, safe='')}"
                             for k, v in pairs)
    fragment = parts.fragment
    if fragment and "=" in fragment and any(secret_param(k) for k, _ in parse_qsl(fragment)):
        fragment = MASK
    if (query, fragment) == (parts.query, parts.fragment):
        return redact_query_pairs(masked)  # a secret pair urllib did not see as query (after a ';', in a path)
    return urlunsplit(parts._replace(query=query, fragment=fragment))


def mask_userinfo(url: str) -> str:
    """Anything before the last ``@`` of a URL's authority replaced by ``***``, found without parsing the URL.

    The authority runs from after ``scheme://`` (or the start, without a scheme) to the first ``?``, ``#`` or
    whitespace; ``/`` does not end it, because a password may hold one. The part before the ``@`` is masked when
    it holds a ``:`` or no ``/`` (user:password, a token as user name); a ``/`` and no ``:`` is a path holding an
    ``@`` (``http://host/@name``) and stays. Masking a little too much is the safe side."""
    if "@" not in url:
        return url
    scheme = SCHEME_RE.match(url)
    start = scheme.end() if scheme else len(url) - len(url.lstrip())
    end = AUTHORITY_END_RE.search(url, start)
    stop = end.start() if end else len(url)
    at = url.rfind("@", start, stop)
    if at <= start:
        return url
    before = url[start:at]
    if not scheme and ":" not in before:
        return url  # name@host without a scheme: an e-mail address or a git remote, no password
    if ":" in before or "/" not in before:
        return f"{url[:start]}{MASK}{url[at:]}"
    return url


def redact_query_pairs(text: str) -> str:
    """Every ``?name=value`` / ``&name=value`` / ``;name=value`` pair with a secret-looking name masked."""
    if "=" not in text:
        return text
    return QUERY_PAIR_RE.sub(lambda m: f"{m.group(1)}={MASK}" if secret_param(m.group(1)) else m.group(0), text)


def redact_text(text: str) -> str:
    """Every URL inside free text redacted (error messages, labels, whole reports), any ``name:secret@host``
    without a scheme, and any ``?name=value`` / ``&name=value`` query pair with a secret-looking name even where
    the URL around it is split (as urllib3 logs ``http://host "GET /path?token=… HTTP/1.1"``)."""
    if "=" in text and ("?" in text or "&" in text or ";" in text):
        text = redact_query_pairs(text)
    if "@" in text:
        text = BARE_USERINFO_RE.sub(lambda m: f"{m.group(1)}{MASK}@", text)
    if "://" not in text:
        return text

    def one(match: re.Match[str]) -> str:
        url = match.group(0)
        core = url.rstrip(".,;:!?)]}'")
        return redact_url(core) + url[len(core):]

    return URL_IN_TEXT_RE.sub(one, text)


def strip_control(text: str) -> str:
    """Text for a terminal: ANSI escape sequences and other control characters removed (tab, newline kept)."""
    return CONTROL_RE.sub("", ANSI_RE.sub("", text))


def csv_cell(value: Any) -> Any:
    """One CSV cell, safe in a spreadsheet: text is cleaned first (escape sequences, control characters, bidi
    overrides, zero-width characters, leading whitespace removed) and only then escaped with a leading ``'`` when
    it starts like a formula (OWASP CSV injection). In the other order ``\u202e=HYPERLINK(…)`` or
    ``\x1b[0m+SUM(1,2)`` passed the check and became a formula once the terminal or a viewer dropped the prefix.
    Numbers stay numbers (a −42.0 % change is data and stays summable)."""
    if not isinstance(value, str):
        return value
    text = INVISIBLE_RE.sub("", strip_control(value)).lstrip()
    return "'" + text if text.startswith(CSV_FORMULA_START) else text


def one_line(text: str, limit: int = 200) -> str:
    """Server- or user-supplied text as one short, printable, redacted line (a Location header, a name)."""
    flat = " ".join(strip_control(redact_text(str(text))).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def md_escape(text: object) -> str:
    """Text shown literally by Markdown renderers (Streamlit's included): no links, images, emphasis, headings,
    HTML, LaTeX, colour/icon directives or autolinks.

    Backslash-escapes the punctuation that starts Markdown syntax (``[ ] ( ) < > ! * _ ` ~ # | $ : @ = { } \\``),
    and splits ``://``, ``www.`` and ``@`` with a zero-width space (GFM's bare autolinks); digits, ``.``, ``,``,
    ``-`` and ``+`` stay as they are, so
    numbers read the same in plain-text places. Newlines become spaces so a value cannot open a block of its own."""
    flat = unicodedata.normalize("NFC", strip_control(str(text))).replace("\r", " ").replace("\n", " ")
    # GFM's bare autolinks survive backslash escapes (``http\://x`` still links), so a zero-width space splits
    # "://", "www." and "@": the text reads the same and no longer parses as a URL or an e-mail address
    flat = AUTOLINK_RE.sub(lambda m: m.group(0)[:-1] + ZWSP + m.group(0)[-1], flat)
    return MD_SPECIAL_RE.sub(r"\\\1", flat)


def install_log_redaction() -> None:
    """Redact every log record of the process as it is made (urllib3 logs request lines with their query,
    Streamlit logs exception text): one record factory wraps whatever factory is installed. Idempotent."""
    factory = logging.getLogRecordFactory()
    if getattr(factory, "redacting", False):
        return

    def make(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = factory(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a malformed record is still logged, as its bare template
            message = str(record.msg)
        if "://" in message or record.exc_info:
            record.msg, record.args = redact_text(message), None
        if record.exc_info and record.exc_info[1] is not None:
            record.exc_text = redact_text("".join(traceback.format_exception(*record.exc_info)))
            record.exc_info = None
        return record

    make.redacting = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(make)
