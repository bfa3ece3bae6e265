"""Address refusal by the resolved address's properties, not its spelling (issue 23, case 8): every way of writing
an IPv6 address that embeds a metadata, link-local or multicast IPv4 address is refused before the connect step.

No traffic leaves the machine: the connect call is replaced by one that records and fails, so a refusal that
did not happen shows as a recorded connect, never as a packet."""

from __future__ import annotations

import ipaddress

import pytest
import requests
from urllib3.util import connection as u3_connection

from triage.errors import TriageError
from triage.sources.metrics import fetch as fetch_module
from triage.sources.metrics.fetch import (
    BoundedSession,
    ScrapePolicy,
    always_refused,
    checked_addresses,
    embedded_ipv4,
    fetch,
    parse_allow,
    refusal,
)

IP = ipaddress.ip_address
ALLOW_ALL = parse_allow(["0.0.0.0/0", "::/0"])

# (spelling inside the URL's brackets, the IPv4 address it leads to)
EMBEDDING = [
    ("::a9fe:a9fe", "169.254.169.254"),                        # IPv4-compatible, hex
    ("::169.254.169.254", "169.254.169.254"),                  # IPv4-compatible, dotted
    ("0:0:0:0:0:0:a9fe:a9fe", "169.254.169.254"),              # IPv4-compatible, zero-filled
    ("0000:0000:0000:0000:0000:0000:169.254.169.254", "169.254.169.254"),
    ("::ffff:a9fe:a9fe", "169.254.169.254"),                   # IPv4-mapped, hex
    ("::ffff:169.254.169.254", "169.254.169.254"),             # IPv4-mapped, dotted
    ("0:0:0:0:0:FFFF:A9FE:A9FE", "169.254.169.254"),           # IPv4-mapped, upper case, zero-filled
    ("::ffff:0:a9fe:a9fe", "169.254.169.254"),                 # IPv4-translated (SIIT)
    ("64:ff9b::a9fe:a9fe", "169.254.169.254"),                 # NAT64 well-known prefix, hex
    ("64:ff9b::169.254.169.254", "169.254.169.254"),           # NAT64 well-known prefix, dotted
    ("64:FF9B:0:0:0:0:A9FE:A9FE", "169.254.169.254"),
    ("64:ff9b:1::a9fe:a9fe", "169.254.169.254"),               # NAT64 local-use prefix, /96 layout
    ("64:ff9b:1:a9fe:a9:fe00::", "169.254.169.254"),           # NAT64 local-use prefix, /48 layout (RFC 6052)
    ("64:ff9b:1:0:a9:fea9:fe00:0", "169.254.169.254"),         # ... /64 layout
    ("2002:a9fe:a9fe::", "169.254.169.254"),                   # 6to4
    ("2002:a9fe:a9fe:1::1", "169.254.169.254"),
    ("2001:0:4136:e378:8000:63bf:5601:5601", "169.254.169.254"),  # Teredo (client address is inverted)
    ("::ffff:a9fe:aa02", "169.254.170.2"),                     # AWS ECS task metadata
    ("64:ff9b::6464:64c8", "100.100.100.200"),                 # Alibaba metadata through NAT64
    ("::ffff:a83f:8110", "168.63.129.16"),                     # Azure wire server
    ("64:ff9b::a9fe:101", "169.254.1.1"),                      # any link-local IPv4
    ("::ffff:e000:1", "224.0.0.1"),                            # multicast
]
PLAIN = ["::1", "::ffff:127.0.0.1", "64:ff9b::7f00:1", "2001:db8::1", "::ffff:10.0.0.1", "2002:0a00:0001::1"]


@pytest.fixture
def connects(monkeypatch) -> list[tuple[str, int]]:
    """Every connect the fetch would make, recorded and failed (never sent)."""
    made: list[tuple[str, int]] = []

    def record(address, *args, **kwargs):
        made.append(address)
        raise ConnectionRefusedError("connect recorded by the test, not made")

    monkeypatch.setattr(u3_connection, "create_connection", record)  # what urllib3 connects with
    return made


@pytest.mark.parametrize("spelling,inner", EMBEDDING, ids=[s for s, _ in EMBEDDING])
def test_an_embedded_refused_ipv4_is_refused_by_value(spelling, inner):
    ip = IP(spelling)
    assert IP(inner) in embedded_ipv4(ip)
    why = always_refused(ip)
    assert why is not None and inner in why, why
    assert refusal(f"[{spelling}]", [ip], ALLOW_ALL) is not None       # no allowlist lets it in
    assert refusal("innocent.example", [IP("10.0.0.1"), ip], ScrapePolicy()) is not None  # nor a name to it
    with pytest.raises(fetch_module.Refused):
        checked_addresses(f"[{spelling}]", 80, ALLOW_ALL)


@pytest.mark.parametrize("spelling,inner", EMBEDDING, ids=[s for s, _ in EMBEDDING])
def test_the_fetch_and_the_api_session_never_reach_the_connect_step(connects, spelling, inner):
    url = f"http://[{spelling}]/metrics"
    with pytest.raises(TriageError, match="refused: .*embeds") as err:
        fetch(url, timeout=2.0, policy=ScrapePolicy())
    assert "\n" not in err.value.line()
    with pytest.raises(requests.exceptions.ConnectionError, match="refused"):
        BoundedSession(2.0).get(f"http://[{spelling}]:9090/api/v1/query")
    assert connects == []


@pytest.mark.parametrize("spelling", PLAIN)
def test_loopback_and_ordinary_addresses_still_reach_the_connect_step(connects, spelling):
    """The refusal is by property: ordinary and loopback addresses (even embedded) are not refused here."""
    assert always_refused(IP(spelling)) is None
    with pytest.raises(TriageError, match="unreachable"):
        fetch(f"http://[{spelling}]:9/metrics", timeout=2.0, policy=ScrapePolicy())
    assert connects and str(connects[0][0]) == str(IP(spelling))
