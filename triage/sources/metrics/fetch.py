"""One bounded HTTP GET for every scrape: time, size, redirects and target addresses all limited.

* connect and total time limits: a watchdog shuts the socket at the deadline, so neither a server that trickles
  its headers or body nor an endless stream can outlast ``timeout``;
* the body is read in chunks and decompressed here (gzip/deflate, with ``max_length``), never past ``max_bytes``;
* redirects are never followed, and a 3xx answer's body is never read (requests reads it whole, decompressed,
  even with ``allow_redirects=False``): the error names where it pointed, redacted, on one line;
* link-local and cloud-metadata addresses are always refused, decided on the resolved address before any
  connection, and the connection then goes to exactly that address (no second lookup to rebind);
* an optional allowlist of hosts/CIDRs (``TRIAGE_SCRAPE_ALLOW`` or ``[scrape] allow`` in secrets.toml) limits
  the targets of a shared deployment;
* errors carry status, content type and size, never a byte of the response body.
"""

from __future__ import annotations

import heapq
import io
import ipaddress
import itertools
import os
import socket
import ssl
import threading
import time
import tomllib
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from http.client import HTTPException
from pathlib import Path
from ssl import CertificateError
from typing import Any, cast
from urllib.parse import unquote, urlsplit

import requests
from requests.adapters import BaseAdapter
from requests.structures import CaseInsensitiveDict
from requests.utils import DEFAULT_CA_BUNDLE_PATH, default_user_agent, get_encoding_from_headers
from urllib3 import BaseHTTPResponse, HTTPConnectionPool, HTTPSConnectionPool, Timeout, make_headers
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.exceptions import (
    ConnectTimeoutError,
    DecodeError,
    LocationParseError,
    NameResolutionError,
    NewConnectionError,
    ProtocolError,
    ReadTimeoutError,
)
from urllib3.exceptions import HTTPError as Urllib3Error
from urllib3.exceptions import SSLError as Urllib3SSLError
from urllib3.util import parse_url

from triage.errors import TriageError
from triage.safe_text import one_line, redact_url

USER_AGENT = default_user_agent()  # what requests sends, so a scraped server sees no change
MAX_BODY_BYTES = 32 * 1024 * 1024  # a large vLLM /metrics is a few MB
CHUNK = 64 * 1024
INFLATE_STEP = 1024 * 1024  # decompressed bytes per zlib call
ALLOW_ENV = "TRIAGE_SCRAPE_ALLOW"
DEFAULT_SECRETS = (Path.home() / ".streamlit" / "secrets.toml", Path(".streamlit") / "secrets.toml")
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

# Always refused, whatever the allowlist says: instance metadata services and link-local ranges.
METADATA_ADDRESSES = frozenset(ipaddress.ip_address(a) for a in (
    "169.254.169.254",   # AWS, GCP, Azure, OpenStack, DigitalOcean … (link-local anyway)
    "169.254.170.2",     # AWS ECS task metadata
    "100.100.100.200",   # Alibaba Cloud
    "168.63.129.16",     # Azure wire server
    "192.0.0.192",       # Oracle Cloud (classic)
    "fd00:ec2::254",     # AWS IMDS over IPv6
))
METADATA_NAMES = frozenset({"metadata", "metadata.google.internal", "metadata.goog", "instance-data",
                            "instance-data.ec2.internal", "metadata.azure.internal", "metadata.tencentyun.com"})


class Refused(Exception):
    """A target the policy refuses (raised before any connection is made)."""


class ScrapeRefused(TriageError):
    """``fetch``'s error for a target the policy refuses: decided before any connection, so it says nothing
    about whether anything listens there."""


@dataclass(frozen=True)
class ScrapePolicy:
    """Which targets a scrape may reach. An empty allowlist allows any host but the always-refused ones."""

    hosts: frozenset[str] = frozenset()
    networks: tuple[IPNetwork, ...] = ()
    max_bytes: int = MAX_BODY_BYTES

    @property
    def restricted(self) -> bool:
        return bool(self.hosts or self.networks)

    def describe(self) -> str:
        return ", ".join(sorted(self.hosts) + [str(n) for n in self.networks]) or "any host"


def parse_allow(entries: Iterable[str], where: str = ALLOW_ENV) -> ScrapePolicy:
    """Hosts and CIDRs (``10.0.0.0/8``, ``127.0.0.1``, ``vllm.internal``) as a policy; bad entries are refused."""
    hosts: set[str] = set()
    nets: list[IPNetwork] = []
    for raw in entries:
        entry = str(raw).strip().lower()
        if not entry:
            continue
        try:
            nets.append(ipaddress.ip_network(entry, strict=False))
            continue
        except ValueError:
            pass
        if "/" in entry or ":" in entry or not all(part and len(part) < 64 for part in entry.rstrip(".").split(".")):
            raise TriageError(f"'{one_line(entry, 60)}' is neither a host name nor an address/CIDR", where=where)
        hosts.add(entry.rstrip("."))
    return ScrapePolicy(frozenset(hosts), tuple(nets))


def policy_from_config(env: Mapping[str, str] | None = None, secrets: Iterable[Path] = DEFAULT_SECRETS) -> ScrapePolicy:
    """The allowlist from ``TRIAGE_SCRAPE_ALLOW`` (comma separated), else ``[scrape] allow = [...]`` in secrets."""
    env = os.environ if env is None else env
    if env.get(ALLOW_ENV, "").strip():
        return parse_allow(env[ALLOW_ENV].split(","), ALLOW_ENV)
    entries: list[str] = []
    where = ""
    for path in secrets:
        if not path.is_file():
            continue
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise TriageError(f"cannot read the scrape allowlist ({type(exc).__name__})", where=str(path)) from None
        allow = (data.get("scrape") or {}).get("allow") if isinstance(data.get("scrape"), dict) else None
        if allow is None:
            continue
        if isinstance(allow, str):
            allow = allow.split(",")
        if not isinstance(allow, list):
            raise TriageError("must be a list of hosts or CIDRs", where=str(path), key="scrape.allow")
        entries, where = [str(a) for a in allow], str(path)  # the project file wins over the home one
    return parse_allow(entries, where) if entries else ScrapePolicy()


# IPv6 prefixes that carry an IPv4 address a translator or tunnel may deliver to (RFC 6052 NAT64, the well-known
# and the local-use prefix; RFC 8215), besides IPv4-mapped, IPv4-compatible, 6to4 and Teredo (ipaddress knows those)
NAT64_WELL_KNOWN = ipaddress.IPv6Network("64:ff9b::/96")
NAT64_LOCAL = ipaddress.IPv6Network("64:ff9b:1::/48")
# where RFC 6052 puts the 4 bytes of the IPv4 address for each prefix length (byte 8, "u", is always skipped)
RFC6052_BYTES = {48: (6, 7, 9, 10), 56: (7, 9, 10, 11), 64: (9, 10, 11, 12), 96: (12, 13, 14, 15)}


def embedded_ipv4(ip: IPAddress) -> list[ipaddress.IPv4Address]:
    """Every IPv4 address an IPv6 address can lead to: IPv4-mapped (``::ffff:a.b.c.d``), IPv4-compatible
    (``::a.b.c.d``, deprecated but routed by some stacks), IPv4-translated (``::ffff:0:a.b.c.d``), NAT64
    (``64:ff9b::/96`` and, in every RFC 6052 layout a /48../96 operator prefix may use, ``64:ff9b:1::/48``),
    6to4 (``2002::/16``) and Teredo (server and client). Decided on the address's value, so no spelling (hex,
    dotted, zero-filled) differs."""
    if not isinstance(ip, ipaddress.IPv6Address):
        return []
    packed = ip.packed
    found: list[ipaddress.IPv4Address] = []
    if ip.ipv4_mapped is not None:
        found.append(ip.ipv4_mapped)
    if packed[:12] == bytes(12) and int(ip) > 0xFFFF:  # ::a.b.c.d, not :: or ::1 (nor other ::/112 oddities)
        found.append(ipaddress.IPv4Address(packed[12:]))
    if packed[:12] == bytes(8) + b"\xff\xff\0\0":  # IPv4-translated ::ffff:0:a.b.c.d (SIIT, RFC 2765)
        found.append(ipaddress.IPv4Address(packed[12:]))
    if ip in NAT64_WELL_KNOWN:
        found.append(ipaddress.IPv4Address(packed[12:]))
    if ip in NAT64_LOCAL:
        found += [ipaddress.IPv4Address(bytes(packed[i] for i in at)) for at in RFC6052_BYTES.values()]
    if ip.sixtofour is not None:
        found.append(ip.sixtofour)
    if ip.teredo is not None:
        found += list(ip.teredo)
    return found


def _refused_itself(ip: IPAddress) -> str | None:
    if ip in METADATA_ADDRESSES:
        return "a cloud metadata address"
    if ip.is_link_local:
        return "a link-local address"
    if ip.is_multicast:
        return "a multicast address"
    return None


def always_refused(ip: IPAddress) -> str | None:
    """Why ``ip`` is never scraped (cloud metadata, link-local, multicast; or an IPv6 address embedding such an
    IPv4 address, which a NAT64 / 6to4 / Teredo path or a dual stack would deliver there), or None."""
    why = _refused_itself(ip)
    if why:
        return f"{ip} is {why}"
    for inner in embedded_ipv4(ip):
        why = _refused_itself(inner)
        if why:
            return f"{ip} embeds {inner}, {why}"
    return None


def refusal(host: str, ips: Iterable[IPAddress], policy: ScrapePolicy) -> str | None:
    """The deciding function: why ``host`` (resolved to ``ips``) may not be scraped, or None when it may."""
    name = host.strip("[]").rstrip(".").lower()
    if name in METADATA_NAMES:
        return f"{name} is a cloud metadata host"
    ips = list(ips)
    if not ips:
        return f"{name} resolves to no address"
    for ip in ips:
        why = always_refused(ip)
        if why:
            return why
    if not policy.restricted or name in policy.hosts:
        return None
    outside = [ip for ip in ips if not any(ip.version == n.version and ip in n for n in policy.networks)]
    if outside:
        return f"{name} ({outside[0]}) is not in the scrape allowlist ({policy.describe()})"
    return None


def _literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host.strip("[]").split("%")[0])
    except ValueError:
        return None


def resolve(host: str, port: int) -> list[IPAddress]:
    """Every address ``host`` resolves to (a literal address resolves to itself, without a lookup)."""
    literal = _literal(host)
    if literal is not None:
        return [literal]
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise UnknownHost(host) from exc
    seen: dict[IPAddress, None] = {}
    for info in infos:
        seen.setdefault(ipaddress.ip_address(str(info[4][0]).split("%")[0]), None)
    return list(seen)


def checked_addresses(host: str, port: int, policy: ScrapePolicy) -> list[IPAddress]:
    """Resolve and decide; raises Refused before any connection is attempted."""
    name = host.strip("[]").rstrip(".").lower()
    if name in METADATA_NAMES:  # refused by name: not even looked up
        raise Refused(f"{name} is a cloud metadata host")
    ips = resolve(host, port)
    why = refusal(host, ips, policy)
    if why:
        raise Refused(why)
    return ips


class UnknownHost(Exception):
    """The target's host name resolves to nothing (raised before any connection is attempted)."""


class TooLarge(TriageError):
    """An answer past the size cap (after decompression); the rest is not read."""


class UnsupportedEncoding(TriageError):
    """An answer in a Content-Encoding this module does not decompress."""


@dataclass
class _Guard:
    """Per-request state shared with the connection classes: the request's open sockets, the watchdog's verdict."""

    sockets: list[socket.socket] = field(default_factory=list)
    expired: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def adopt(self, sock: socket.socket) -> None:
        """A socket this request uses (new or kept alive): the deadline covers it."""
        with self.lock:
            if self.expired:
                raise TimeoutError("deadline passed")
            self.sockets.append(sock)

    def release(self) -> None:
        """The request is done with its sockets (before its connection goes back to a pool for another)."""
        with self.lock:
            self.sockets.clear()

    def expire(self) -> None:
        """At the deadline: wake any blocked read by shutting the socket down."""
        with self.lock:
            self.expired = True
            for sock in self.sockets:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


class Watchdog:
    """One daemon thread for every deadline of the process: at its time, a fetch's ``expire`` runs.

    A timer thread per request made every caller wait until that new thread was scheduled (on a busy machine,
    most of a query's cost); here a request only pushes its deadline onto a heap. ``cancel`` is O(1): a
    cancelled entry is dropped when it reaches the top (at its deadline, so the heap holds at most the
    requests of the last ``timeout`` seconds)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int]] = []
        self._pending: dict[int, Callable[[], None]] = {}
        self._ids = itertools.count()
        self._thread: threading.Thread | None = None

    def schedule(self, delay: float, action: Callable[[], None]) -> int:
        """Run ``action`` in ``delay`` seconds unless cancelled; a token for ``cancel``."""
        with self._cond:
            token = next(self._ids)
            self._pending[token] = action
            heapq.heappush(self._heap, (time.monotonic() + delay, token))
            if self._thread is None or not self._thread.is_alive():  # first use, or after a fork
                self._thread = threading.Thread(target=self._run, name="fetch-watchdog", daemon=True)
                self._thread.start()
            elif self._heap[0][1] == token:
                self._cond.notify()  # the new deadline is the nearest
            return token

    def cancel(self, token: int) -> None:
        with self._cond:
            self._pending.pop(token, None)

    def _run(self) -> None:
        with self._cond:
            while True:
                while self._heap and self._heap[0][1] not in self._pending:
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._cond.wait()
                    continue
                when, token = self._heap[0]
                now = time.monotonic()
                if when > now:
                    self._cond.wait(when - now)
                    continue
                heapq.heappop(self._heap)
                action = self._pending.pop(token)
                self._cond.release()
                try:
                    action()
                except Exception:  # noqa: BLE001, S110 - an expire that fails must not stop the other deadlines
                    pass
                finally:
                    self._cond.acquire()


WATCHDOG = Watchdog()
_CURRENT = threading.local()  # the guard of the request this thread is making


def _join(conn: HTTPConnection) -> None:
    """The connection's socket joins the guard of this thread's request, so the watchdog can shut it."""
    guard: _Guard | None = getattr(_CURRENT, "guard", None)
    if guard is not None and conn.sock is not None:
        guard.adopt(conn.sock)


class _GuardedHTTP(HTTPConnection):
    """urllib3's connection with its socket in the request's guard: a new socket once connected, a kept-alive one
    when a request reuses it (``connect`` and ``request`` are the connection's public methods)."""

    def connect(self) -> None:
        super().connect()
        _join(self)

    def request(self, *args: Any, **kwargs: Any) -> None:
        if self.sock is not None:
            _join(self)
        super().request(*args, **kwargs)


class _GuardedHTTPS(_GuardedHTTP, HTTPSConnection):
    """As _GuardedHTTP, over TLS: its ``connect`` runs HTTPSConnection's, so the socket joins once the handshake is
    done (each handshake read waits at most the timeout)."""


class _Pool(HTTPConnectionPool):
    ConnectionCls = _GuardedHTTP


class _TLSPool(HTTPSConnectionPool):
    ConnectionCls = _GuardedHTTPS


@dataclass(frozen=True)
class _Target:
    """A URL split for a pinned request: the name to check and present, the port, the path to ask for."""

    scheme: str
    host: str  # without IPv6 brackets
    port: int
    host_header: str
    path: str
    auth: str | None


def _target(url: str) -> _Target:
    """The URL's parts (urllib3's public parser); LocationParseError for one that is not an http(s) URL."""
    parts = parse_url(url)
    if parts.scheme not in ("http", "https") or not parts.host:
        raise LocationParseError(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    header = parts.host if parts.port is None else f"{parts.host}:{parts.port}"
    return _Target(parts.scheme, parts.host.strip("[]"), port, header, parts.request_uri, parts.auth)


def _tls(verify: bool | str, cert: Any) -> dict[str, Any]:
    """urllib3's TLS settings for requests' ``verify`` (True, False or a CA bundle path) and ``cert``."""
    if verify is False:
        settings: dict[str, Any] = {"cert_reqs": "CERT_NONE", "assert_hostname": False}
    else:
        where = DEFAULT_CA_BUNDLE_PATH if verify is True else str(verify)
        settings = {"cert_reqs": "CERT_REQUIRED", ("ca_cert_dir" if os.path.isdir(where) else "ca_certs"): where}
    if cert:
        settings["cert_file"], settings["key_file"] = (cert, None) if isinstance(cert, str) else cert
    return settings


class _Pools:
    """Connection pools, one per checked address: each connects to exactly that address (no second lookup to
    rebind) and presents the URL's host name in the Host header, the TLS SNI and the certificate check."""

    def __init__(self, maxsize: int = 1) -> None:
        self._maxsize = maxsize
        self._pools: dict[tuple[Any, ...], HTTPConnectionPool] = {}
        self._lock = threading.Lock()

    def pool(self, target: _Target, ip: IPAddress, tls: Mapping[str, Any]) -> HTTPConnectionPool:
        key = (target.scheme, str(ip), target.port, target.host, tuple(sorted(tls.items())))
        with self._lock:
            found = self._pools.get(key)
            if found is None:
                if target.scheme == "https":
                    name = None if _literal(target.host) else target.host  # an address is checked as itself
                    found = _TLSPool(str(ip), target.port, maxsize=self._maxsize, retries=False,
                                     **{"server_hostname": name, "assert_hostname": name, **tls})
                else:
                    found = _Pool(str(ip), target.port, maxsize=self._maxsize, retries=False)
                self._pools[key] = found
            return found

    def close(self) -> None:
        with self._lock:
            for pool in self._pools.values():
                pool.close()
            self._pools.clear()


def _open(pools: _Pools, target: _Target, policy: ScrapePolicy, method: str, headers: Mapping[str, str],
          body: Any, timeout: float, tls: Mapping[str, Any]) -> BaseHTTPResponse:
    """Send one request to the first checked address that takes a connection; the answer's body is left unread.

    No retries and no redirects (urllib3's public ``urlopen`` parameters); Refused or UnknownHost before any
    connection."""
    ips = checked_addresses(target.host, target.port, policy)
    sent = {**headers, "Host": target.host_header}
    failed: ConnectTimeoutError | None = None
    for ip in ips:
        try:
            return pools.pool(target, ip, tls).urlopen(
                method, target.path, body=body, headers=sent, retries=False, redirect=False,
                preload_content=False, decode_content=False, timeout=Timeout(connect=timeout, read=timeout))
        except ConnectTimeoutError as exc:  # this address takes no connection (NewConnectionError too): the next
            failed = exc
    raise cast(ConnectTimeoutError, failed)


def _finish(answer: BaseHTTPResponse | None, complete: bool) -> None:
    """Hand the connection back: kept alive after a body read to its end, closed otherwise."""
    if answer is None:
        return
    if not complete:
        answer.close()
    answer.release_conn()


API_POOL_SIZE = 32  # a Live refresh sends up to 2 x 8 queries at once to one Prometheus


class NoRedirectSession(requests.Session):
    """A Session that sees no redirect target: requests' ``resolve_redirects`` reads every 3xx body whole and
    decompressed (``resp.content``) before deciding, even with ``allow_redirects=False`` (to store
    ``Response.next``): a 302 with an endless or gzip-bomb body took GBs outside every bound. With no target it
    neither reads nor follows; the caller turns the 3xx into an error naming the Location."""

    def get_redirect_target(self, resp: requests.Response) -> str | None:
        return None


@dataclass(frozen=True)
class Fetched:
    """A 200 answer read within the bounds; ``size`` is the decompressed length in bytes."""

    body: bytes
    status: int
    content_type: str
    size: int
    url: str
    taken_at: float

    def describe(self) -> str:
        return f"HTTP {self.status}, {self.content_type or 'no content type'}, {self.size:,} bytes"


def _mb(n: int) -> str:
    return f"{n / 1024 / 1024:g} MB"


def _decoder(encoding: str, url: str) -> Any:
    if encoding in ("", "identity"):
        return None
    if encoding in ("gzip", "x-gzip", "deflate"):
        return zlib.decompressobj(wbits=47)  # gzip or zlib header, detected
    raise UnsupportedEncoding(f"answered with Content-Encoding '{one_line(encoding, 40)}', which is not supported "
                              "here", where=url)


def _read_body(answer: BaseHTTPResponse, url: str, max_bytes: int, deadline: float) -> bytes:
    encoding = answer.headers.get("Content-Encoding", "").strip().lower()
    decoder = _decoder(encoding, url)
    out = bytearray()
    too_big = TooLarge(f"the answer is larger than {_mb(max_bytes)} (after decompression); not read further",
                       where=url)
    while True:
        _set_read_timeout(answer, deadline)
        chunk = answer.read(CHUNK, decode_content=False)
        if not chunk:
            break
        if decoder is None:
            out += chunk
        else:  # inflated a step at a time: a bomb never holds more than the cap plus one step
            out += decoder.decompress(chunk, min(INFLATE_STEP, max_bytes + 1 - len(out)))
            while decoder.unconsumed_tail and len(out) <= max_bytes:
                out += decoder.decompress(decoder.unconsumed_tail, min(INFLATE_STEP, max_bytes + 1 - len(out)))
            if decoder.unconsumed_tail:
                raise too_big
        if len(out) > max_bytes:
            raise too_big
    if decoder is not None:
        try:
            out += decoder.flush()
        except zlib.error:
            pass
    return bytes(out)


def _set_read_timeout(answer: BaseHTTPResponse, deadline: float) -> None:
    """Each socket read waits at most until the deadline (the watchdog is the backstop)."""
    sock = getattr(answer.connection, "sock", None)
    if sock is not None:
        try:
            sock.settimeout(max(0.01, deadline - time.monotonic()))
        except OSError:
            pass


def _location(answer: BaseHTTPResponse) -> str:
    target = answer.headers.get("Location", "")
    return one_line(redact_url(target), 160) if target else "nowhere (no Location header)"


def redirect_refusal(answer: BaseHTTPResponse) -> str:
    """One line for a 3xx answer: its status and the redacted Location, which is not followed."""
    return (f"HTTP {answer.status}: redirects to {_location(answer)}; redirects are not followed (use "
            "the final URL)")


def _basic_auth(target: _Target) -> dict[str, str]:
    """The URL's user:password as a Basic Authorization header (as requests sends it)."""
    return make_headers(basic_auth=unquote(target.auth)) if target.auth else {}


def fetch(url: str, timeout: float = 5.0, headers: Mapping[str, str] | None = None,
          policy: ScrapePolicy | None = None, accept: str = "*/*",
          refuse_types: tuple[str, ...] = ()) -> Fetched:
    """GET ``url`` within ``timeout`` seconds in total and the policy's size cap; a 200 answer or a TriageError."""
    shown = redact_url(url)
    if not url.startswith(("http://", "https://")):
        raise TriageError("the URL must start with http:// or https://", where=shown)
    if not (timeout > 0 and timeout < float("inf")):
        raise TriageError(f"the timeout must be a positive number of seconds, got {timeout}", where=shown)
    policy = policy if policy is not None else policy_from_config()
    guard = _Guard()
    pools = _Pools()
    deadline = time.monotonic() + timeout
    watchdog = WATCHDOG.schedule(timeout, guard.expire)
    _CURRENT.guard = guard
    answer: BaseHTTPResponse | None = None
    try:
        target = _target(url)
        sent = {"User-Agent": USER_AGENT, "Accept": accept, "Accept-Encoding": "gzip, deflate",
                **_basic_auth(target), **(headers or {})}
        answer = _open(pools, target, policy, "GET", sent, None, timeout, _tls(True, None))
        status = answer.status
        kind = answer.headers.get("Content-Type", "").split(";")[0].strip().lower()
        if 300 <= status < 400:
            raise TriageError(redirect_refusal(answer), where=shown)
        if status != 200:
            raise TriageError(_status_reason(status, answer.reason), where=shown)
        if kind in refuse_types:
            raise TriageError(f"answered {one_line(kind, 60)}, not Prometheus metrics text (is this the /metrics "
                              "URL?)", where=shown)
        body = _read_body(answer, shown, policy.max_bytes, deadline)
        if guard.expired:
            raise TimeoutError
        return Fetched(body, status, one_line(kind, 60), len(body), shown, time.time())
    except Refused as exc:
        raise ScrapeRefused(f"refused: {exc} (not scraped)", where=shown) from None
    except TriageError:
        raise
    except LocationParseError:
        raise TriageError("not a valid http(s) URL", where=shown) from None
    except (UnknownHost, NewConnectionError, Urllib3Error, OSError, HTTPException, ValueError, zlib.error,
            RuntimeError) as exc:
        if guard.expired or timed_out(exc):
            raise TriageError(f"no complete answer within {timeout:g} s", where=shown) from None
        raise TriageError(f"unreachable ({connection_reason(exc)})", where=shown) from None
    finally:
        WATCHDOG.cancel(watchdog)
        _CURRENT.guard = None
        guard.release()
        _finish(answer, complete=False)  # one fetch, one connection: closed
        pools.close()


def _status_reason(status: int, reason: str | None) -> str:
    if status in (401, 403):
        return f"HTTP {status}: the endpoint wants credentials (check the headers / token)"
    if status == 404:
        return "HTTP 404: nothing here (is the path /metrics, and metrics enabled?)"
    return f"HTTP {status} {one_line(reason or '', 60)}".rstrip()


MAX_API_BYTES = 64 * 1024 * 1024  # one Prometheus API answer (label values, an instant vector) is far smaller


class BoundedRefusal(requests.exceptions.RequestException):
    """An API answer the bounds refuse; its text is one line of ours (no byte of the body), fit to show."""


class AnswerTooLarge(BoundedRefusal):
    """An API answer past the size cap (after decompression), refused before the rest is read."""


class RedirectRefused(BoundedRefusal):
    """A 3xx answer: never followed (a redirect could lead off the configured origin, with the profile's custom
    headers, to a body outside the bounds), and its body never read."""


class BoundedAdapter(BaseAdapter):
    """requests' transport for a BoundedSession, through requests' public adapter interface (``send``, ``close``):
    each request goes to a checked, pinned address (kept alive in its pool between requests; a reused socket
    joins the request's guard), within ``timeout`` seconds in total and ``max_bytes`` after decompression.

    The body is read here, within the bounds, and handed over as the Response's ``raw`` stream, which
    ``.content`` and ``.json()`` read. Proxies from the environment are not used: the connection goes to the
    address the policy checked. requests' own ``timeout`` argument is replaced by the total one."""

    def __init__(self, timeout: float, max_bytes: int) -> None:
        super().__init__()
        self.total_timeout = timeout
        self.max_bytes = max_bytes
        self.policy = ScrapePolicy(max_bytes=max_bytes)  # no allowlist: the API URL is the operator's
        self.pools = _Pools(API_POOL_SIZE)

    def send(self, request: requests.PreparedRequest, stream: bool = False, timeout: Any = None,
             verify: bool | str = True, cert: Any = None,
             proxies: Mapping[str, str] | None = None) -> requests.Response:
        url = str(request.url)
        guard = _Guard()
        deadline = time.monotonic() + self.total_timeout
        watchdog = WATCHDOG.schedule(self.total_timeout, guard.expire)
        _CURRENT.guard = guard
        answer: BaseHTTPResponse | None = None
        complete = False
        try:
            target = _target(url)
            answer = _open(self.pools, target, self.policy, str(request.method or "GET"), dict(request.headers),
                           request.body, self.total_timeout, _tls(verify, cert))
            if 300 <= answer.status < 400:
                raise RedirectRefused(redirect_refusal(answer), request=request)
            body = _read_body(answer, redact_url(url), self.max_bytes, deadline)
            WATCHDOG.cancel(watchdog)  # before the connection goes back to the pool for another request
            guard.release()
            if guard.expired:
                raise TimeoutError
            complete = True
            return self._response(request, answer, body)
        except BoundedRefusal:
            raise
        except Refused as exc:
            raise requests.exceptions.ConnectionError(f"refused: {exc}", request=request) from None
        except TooLarge as exc:
            raise AnswerTooLarge(exc.reason, request=request) from None
        except UnsupportedEncoding as exc:
            raise requests.exceptions.ContentDecodingError(exc.reason, request=request) from None
        except LocationParseError:
            raise requests.exceptions.InvalidURL("not a valid http(s) URL", request=request) from None
        except (UnknownHost, Urllib3Error, OSError, HTTPException, zlib.error) as exc:
            if guard.expired or timed_out(exc):
                raise requests.exceptions.ReadTimeout(f"no complete answer within {self.total_timeout:g} s",
                                                      request=request) from None
            if isinstance(exc, zlib.error):
                raise requests.exceptions.ContentDecodingError("the compressed answer is corrupt",
                                                               request=request) from None
            wrapper = requests.exceptions.SSLError if _tls_failure(exc) else requests.exceptions.ConnectionError
            raise wrapper(connection_reason(exc), request=request) from exc
        except RuntimeError as exc:  # urllib3's state errors on a malformed answer: a line, not "a bug"
            raise BoundedRefusal(f"the answer could not be read ({type(exc).__name__})", request=request) from None
        finally:
            WATCHDOG.cancel(watchdog)
            _CURRENT.guard = None
            guard.release()
            _finish(answer, complete)

    def _response(self, request: requests.PreparedRequest, answer: BaseHTTPResponse, body: bytes) -> requests.Response:
        response = requests.Response()
        response.status_code = answer.status
        response.reason = answer.reason or ""
        response.headers = CaseInsensitiveDict(answer.headers)
        response.encoding = get_encoding_from_headers(response.headers)
        response.url = str(request.url)
        response.request = request
        response.raw = io.BytesIO(body)  # read within the bounds; .content and .json() read it from here
        return response

    def close(self) -> None:
        self.pools.close()


class BoundedSession(NoRedirectSession):
    """A requests Session for API clients (prometheus-api-client takes one): every request goes through a
    BoundedAdapter, whatever the client mounts: a checked, pinned connection (kept alive between the requests of
    this session), ``timeout`` seconds in total (a watchdog shuts the socket at the deadline, so neither
    trickled headers nor a trickled body outlast it) and a body read within ``max_bytes`` after
    decompression. Cloud-metadata and link-local targets are refused as for a scrape; there is no allowlist
    (the API URL is the operator's configuration, not a visitor's).

    Redirects are never followed and their bodies never read: a 3xx raises ``RedirectRefused`` naming the redacted
    Location (the operator configures the final URL, as for a scrape).

    Errors are requests exceptions, so the client's callers handle them as before: ``ReadTimeout`` past the
    deadline, ``AnswerTooLarge`` past the cap, ``RedirectRefused`` for a 3xx (both ``BoundedRefusal``, one
    line fit to show), ``ConnectionError`` for a refused or unreachable target (``connection_reason`` names
    why)."""

    def __init__(self, timeout: float, max_bytes: int = MAX_API_BYTES) -> None:
        super().__init__()
        if not (timeout > 0 and timeout < float("inf")):
            raise TriageError(f"the timeout must be a positive number of seconds, got {timeout}")
        self.total_timeout = float(timeout)
        self.max_bytes = max_bytes
        self._adapter = BoundedAdapter(self.total_timeout, max_bytes)
        self._environment: dict[tuple[Any, ...], Any] = {}  # per host: proxies, verify from the env
        self.headers["Accept-Encoding"] = "gzip, deflate"  # the encodings _read_body decompresses within the cap

    def merge_environment_settings(self, url: Any, proxies: Any, stream: Any, verify: Any, cert: Any) -> Any:
        """As requests does it, once per host for this session (it reads every environment variable on each
        call: a millisecond per query, a window's dozens of queries to one host)."""
        key = (urlsplit(str(url)).netloc, tuple(sorted((proxies or {}).items())), stream, verify, cert)
        try:
            found = self._environment.get(key)
        except TypeError:  # an unhashable setting: not cached
            return super().merge_environment_settings(url, proxies, stream, verify, cert)
        if found is None:
            found = self._environment[key] = super().merge_environment_settings(url, proxies, stream, verify, cert)
        return {**found, "proxies": dict(found["proxies"])}

    def get_adapter(self, url: str) -> BaseAdapter:
        return self._adapter  # the bounded transport (http and https), whatever is mounted

    def close(self) -> None:
        self._adapter.close()
        super().close()


def _wrapped(exc: BaseException) -> list[BaseException]:
    """``exc`` and every error it wraps, by reference, not by text: its cause and context, a MaxRetryError's
    ``reason``, and exceptions among its ``args`` (requests and urllib3 wrap the underlying error there)."""
    found: list[BaseException] = []
    todo = [exc]
    while todo and len(found) < 32:
        err = todo.pop(0)
        if any(err is seen for seen in found):
            continue
        found.append(err)
        todo += [x for x in (err.__cause__, err.__context__, getattr(err, "reason", None), *err.args)
                 if isinstance(x, BaseException)]
    return found


def _is_timeout(err: BaseException) -> bool:
    if isinstance(err, NewConnectionError):  # urllib3 files it under ConnectTimeoutError; it is a refusal
        return False
    return isinstance(err, (TimeoutError, ReadTimeoutError, ConnectTimeoutError, requests.exceptions.Timeout))


def timed_out(exc: BaseException) -> bool:
    """Whether ``exc`` is, or wraps, a timeout (socket, urllib3 or requests), decided by type."""
    return any(_is_timeout(err) for err in _wrapped(exc))


def _tls_failure(exc: BaseException) -> bool:
    return any(isinstance(err, (ssl.SSLError, CertificateError, Urllib3SSLError, requests.exceptions.SSLError))
               for err in _wrapped(exc))


# the first kind an error is (or wraps) names it; decided by type, never by the message text
REASONS: tuple[tuple[tuple[type[BaseException], ...], str], ...] = (
    ((ssl.SSLCertVerificationError, CertificateError), "TLS certificate not accepted"),
    ((ssl.SSLError, Urllib3SSLError, requests.exceptions.SSLError), "TLS handshake failed"),
    ((UnknownHost, socket.gaierror, NameResolutionError), "unknown host name"),
    ((ConnectionRefusedError,), "connection refused"),
    ((ConnectionResetError, ConnectionAbortedError, BrokenPipeError), "connection reset"),
    ((zlib.error, DecodeError, requests.exceptions.ContentDecodingError), "the compressed answer is corrupt"),
    ((ProtocolError, HTTPException, requests.exceptions.ChunkedEncodingError), "the answer broke off or is malformed"),
)


def connection_reason(exc: BaseException) -> str:
    """A short human reason for a connection failure: connection refused, unknown host, TLS …"""
    wrapped = _wrapped(exc)
    for kinds, reason in REASONS:
        if any(isinstance(err, kinds) for err in wrapped):
            return reason
    if any(_is_timeout(err) for err in wrapped):
        return "connection timed out"
    return "connection failed"
