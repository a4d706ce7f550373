"""Which addresses the server may send a request to on a tenant's behalf (SSRF policy).

A URL is checked by resolving its host and judging every address it resolves to: one
internal address refuses the URL, since a client may connect to any of them. The checked
addresses travel in the Destination, and the request connects to one of those (see
common.pinned_http), never to a fresh lookup: a name that re-resolves to an internal
address after the check (DNS rebinding) gains nothing.

Refused: loopback, unspecified, private (RFC 1918, ULA), link-local, shared CGNAT space,
benchmarking, documentation, multicast and reserved ranges (IANA's IPv4 and IPv6
special-purpose address registries), and the cloud metadata services. IPv6 forms that
carry an IPv4 address (IPv4-mapped, NAT64 64:ff9b::/96, 6to4 2002::/16) are judged by the
IPv4 address they carry. The provider may open named ranges (settings
WEBHOOK_ALLOWED_NETWORKS); no range opens a metadata service.
"""

import socket
from collections.abc import Iterable
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_address, ip_network
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError
from django.utils.translation import gettext as _

IPAddress = IPv4Address | IPv6Address
IPNetwork = IPv4Network | IPv6Network

SCHEMES = ("http", "https")

# Instance metadata answers with the server's own cloud credentials.
METADATA_SERVICES = frozenset(
    ip_address(a)
    for a in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack, Huawei Cloud, Baidu Cloud
        "169.254.170.2",  # AWS ECS task metadata
        "169.254.0.23",  # Tencent Cloud (metadata.tencentyun.com)
        "100.100.100.200",  # Alibaba Cloud
        "192.0.0.192",  # Oracle Cloud
        "168.63.129.16",  # Azure WireServer: a public address, so named here
        "fd00:ec2::254",  # AWS, IPv6
        "fd20:ce::254",  # GCP, IPv6
    )
)

# First match names the reason; every address outside them must also be is_global.
SPECIAL_RANGES: tuple[tuple[IPNetwork, str], ...] = tuple(
    (ip_network(cidr), reason)
    for cidr, reason in (
        ("0.0.0.0/8", "an unspecified address"),
        ("10.0.0.0/8", "a private address (RFC 1918)"),
        ("100.64.0.0/10", "a shared (CGNAT) address (RFC 6598)"),
        ("127.0.0.0/8", "a loopback address"),
        ("169.254.0.0/16", "a link-local address"),
        ("172.16.0.0/12", "a private address (RFC 1918)"),
        ("192.0.0.0/24", "an IETF protocol address"),
        ("192.0.2.0/24", "a documentation address"),
        ("192.88.99.0/24", "a reserved address"),
        ("192.168.0.0/16", "a private address (RFC 1918)"),
        ("198.18.0.0/15", "a benchmarking address (RFC 2544)"),
        ("198.51.100.0/24", "a documentation address"),
        ("203.0.113.0/24", "a documentation address"),
        ("224.0.0.0/4", "a multicast address"),
        ("240.0.0.0/4", "a reserved address"),
        ("::/128", "an unspecified address"),
        ("::1/128", "a loopback address"),
        ("::/96", "a deprecated IPv4-compatible address"),
        ("64:ff9b:1::/48", "a local-use translation address"),
        ("100::/64", "a discard-only address"),
        ("2001::/23", "an IETF protocol address"),
        ("2001:db8::/32", "a documentation address"),
        ("3fff::/20", "a documentation address"),
        ("fc00::/7", "a unique local address (RFC 4193)"),
        ("fe80::/10", "a link-local address"),
        ("fec0::/10", "a deprecated site-local address"),
        ("ff00::/8", "a multicast address"),
    )
)
_GLOBAL_UNICAST_V6 = ip_network("2000::/3")
_NAT64 = ip_network("64:ff9b::/96")


class EgressRefused(Exception):
    """The URL may not be requested; `reason` says why in one sentence."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Destination:
    """A URL that passed the policy, with the addresses its host resolved to."""

    scheme: str
    host: str  # as written in the URL, without brackets: the Host header and TLS SNI
    port: int
    target: str  # path and query, for the request line
    addresses: tuple[IPAddress, ...]


def check_url(url: str, *, allowed: Iterable[IPNetwork] = ()) -> Destination:
    """The URL's Destination, or EgressRefused if any address its host resolves to is
    internal and outside `allowed`."""
    try:
        parts = urlsplit(url)
    except ValueError as error:  # an unclosed "[", a bracketed host that is no address
        raise EgressRefused(f"the URL is not a valid URL: {error}") from None
    if parts.scheme.lower() not in SCHEMES:
        raise EgressRefused(f"only http and https URLs are allowed, not {parts.scheme!r}")
    if parts.username is not None or parts.password is not None:
        raise EgressRefused("the URL may not carry a user name or password")
    if not parts.hostname:
        raise EgressRefused("the URL has no host")
    try:
        given = parts.port
    except ValueError as error:
        raise EgressRefused(f"the URL's port is not valid: {error}") from None
    if given == 0:
        raise EgressRefused("the URL's port is not valid: port 0")
    port = given or (443 if parts.scheme.lower() == "https" else 80)
    host = parts.hostname
    addresses = resolve(host, port)
    networks = tuple(allowed)
    for address in addresses:
        why = refusal(address, allowed=networks)
        if why is None:
            continue
        judged = carried_ipv4(address) or address
        if _is_literal(host):
            raise EgressRefused(f"{judged} is {why}")
        raise EgressRefused(f"{host} resolves to {judged}, {why}")
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return Destination(parts.scheme.lower(), host, port, target, addresses)


def check_url_for_webhooks(url: str) -> Destination:
    return check_url(url, allowed=settings.WEBHOOK_ALLOWED_NETWORKS)


def validate_webhook_url(value: str) -> None:
    """Model field validator: the same check as at send time, so the operator hears now."""
    if not value:
        return
    try:
        check_url_for_webhooks(value)
    except EgressRefused as refused:
        raise ValidationError(
            _("%(reason)s; webhooks are sent only to public addresses."),
            code="internal_address",
            params={"reason": refused.reason},
        ) from None


def refusal(address: IPAddress, *, allowed: tuple[IPNetwork, ...] = ()) -> str | None:
    """Why `address` may not be connected to, or None if it may."""
    judged = carried_ipv4(address) or address
    if judged in METADATA_SERVICES:
        return "a cloud metadata service"
    if any(judged in network for network in allowed):
        return None
    for network, reason in SPECIAL_RANGES:
        if judged in network:
            return reason
    if isinstance(judged, IPv6Address) and judged not in _GLOBAL_UNICAST_V6:
        return "a reserved address"
    if not judged.is_global:
        return "not a globally routable address"
    return None


def carried_ipv4(address: IPAddress) -> IPv4Address | None:
    """The IPv4 address an IPv6 address stands for: IPv4-mapped, NAT64 or 6to4."""
    if isinstance(address, IPv4Address):
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address in _NAT64:
        return IPv4Address(int(address) & 0xFFFFFFFF)
    return address.sixtofour


def resolve(host: str, port: int) -> tuple[IPAddress, ...]:
    """Every address `host` resolves to, in the resolver's order; a literal as itself. An
    IPv4-mapped IPv6 address becomes the IPv4 address, which is what it reaches."""
    try:
        found = [ip_address(host)]
    except ValueError:
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (socket.gaierror, UnicodeError) as error:
            raise EgressRefused(f"{host} does not resolve ({error})") from None
        found = [ip_address(info[4][0]) for info in infos]
    unique = dict.fromkeys(
        a.ipv4_mapped if isinstance(a, IPv6Address) and a.ipv4_mapped else a for a in found
    )
    if not unique:
        raise EgressRefused(f"{host} does not resolve")
    return tuple(unique)


def _is_literal(host: str) -> bool:
    try:
        ip_address(host)
    except ValueError:
        return False
    return True
