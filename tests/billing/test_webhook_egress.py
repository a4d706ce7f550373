"""A tenant's webhook URL cannot aim the server at an internal address (SSRF).

Every connection these tests make goes to 127.0.0.1, and no name is looked up in real DNS:
`fake_dns` answers the names a test plans and refuses the rest, and `loopback_only` fails
the test if anything connects elsewhere. Refusals are proven with no connection at all.
"""

import re
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from ipaddress import ip_address, ip_network
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from django import forms

from incidents import notifications
from incidents.models import Incident
from incidents.notifications import WebhookFailed
from leases.models import Tenant
from tests.factories import TenantFactory, make_lease

HOOK_HOST = "hooks.zhiyuan.example"
LOOPBACK = [ip_network("127.0.0.0/8")]

_real_getaddrinfo = socket.getaddrinfo
_real_connect = socket.socket.connect


class FakeDNS:
    """Answers planned names, one answer per lookup (the last repeats); parses numeric
    hosts the way the C library does; refuses every other name without asking a server."""

    def __init__(self) -> None:
        self.answers: dict[str, list[list[str]]] = {}
        self.lookups: list[str] = []

    def plan(self, host: str, *answers: list[str]) -> None:
        self.answers[host] = list(answers)

    def __call__(self, host, port, family=0, type=0, proto=0, flags=0):  # type: ignore[no-untyped-def]
        name = host.decode() if isinstance(host, bytes) else host
        if name not in self.answers:
            return _real_getaddrinfo(host, port, family, type, proto, flags | socket.AI_NUMERICHOST)
        self.lookups.append(name)
        queue = self.answers[name]
        addresses = queue.pop(0) if len(queue) > 1 else queue[0]
        number = int(port or 0)
        return [
            (socket.AF_INET6, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (a, number, 0, 0))
            if ":" in a
            else (socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (a, number))
            for a in addresses
        ]


@pytest.fixture(autouse=True)
def fake_dns(monkeypatch) -> FakeDNS:
    dns = FakeDNS()
    monkeypatch.setattr(socket, "getaddrinfo", dns)
    return dns


@pytest.fixture(autouse=True)
def loopback_only(monkeypatch) -> Iterator[list[str]]:
    """Every address a socket tried to connect to; anything but 127.0.0.1 fails the test
    before a packet leaves."""
    tried: list[str] = []

    def connect(sock: socket.socket, address: tuple) -> None:  # type: ignore[type-arg]
        tried.append(address[0])
        if address[0] != "127.0.0.1":
            raise AssertionError(f"the test tried to connect to {address[0]}")
        _real_connect(sock, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    yield tried
    assert set(tried) <= {"127.0.0.1"}


@pytest.fixture
def allow_loopback(settings) -> None:
    settings.WEBHOOK_ALLOWED_NETWORKS = LOOPBACK


# ---------------------------------------------------------------------------------------
# The address policy, at send time. Nothing is connected to: each URL is refused first.


def make_incident(webhook_url: str) -> Incident:
    tenant = TenantFactory(slug="zhiyuan", contact_email="", webhook_url=webhook_url)
    lease = make_lease(tenant=tenant, reference="LAB-1", contracted_bandwidth_gbps=1)
    return Incident.objects.create(
        lease=lease,
        kind="throughput",
        target="lab-h1>lab-h3",
        pattern="ring",
        opened_at=datetime(2026, 11, 29, 2, 5, tzinfo=UTC),
        violations=3,
        rule="throughput >= 95% of 1 Gbps contracted (terms v1)",
        terms=lease.terms.first(),
    )


REFUSED_ADDRESSES = [
    ("http://127.0.0.1:8080/hook", "127.0.0.1 is a loopback address"),
    ("http://[::1]/hook", "::1 is a loopback address"),
    ("http://0.0.0.0/", "0.0.0.0 is an unspecified address"),
    ("http://[::]/", ":: is an unspecified address"),
    ("http://10.1.2.3/", "10.1.2.3 is a private address (RFC 1918)"),
    ("http://172.31.255.254/", "172.31.255.254 is a private address (RFC 1918)"),
    ("http://192.168.1.1/", "192.168.1.1 is a private address (RFC 1918)"),
    ("http://[fd12:3456::1]/", "fd12:3456::1 is a unique local address (RFC 4193)"),
    ("http://169.254.10.1/", "169.254.10.1 is a link-local address"),
    ("http://[fe80::1]/", "fe80::1 is a link-local address"),
    ("http://100.64.0.1/", "100.64.0.1 is a shared (CGNAT) address (RFC 6598)"),
    ("http://198.19.255.1/", "198.19.255.1 is a benchmarking address (RFC 2544)"),
    ("http://224.0.0.251/", "224.0.0.251 is a multicast address"),
    ("http://[ff02::1]/", "ff02::1 is a multicast address"),
    ("http://240.0.0.1/", "240.0.0.1 is a reserved address"),
    ("http://255.255.255.255/", "255.255.255.255 is a reserved address"),
    ("http://192.0.2.7/", "192.0.2.7 is a documentation address"),
    ("http://[2001:db8::7]/", "2001:db8::7 is a documentation address"),
    # Cloud instance metadata: credentials for the server's own cloud account.
    ("http://169.254.169.254/latest/meta-data/", "169.254.169.254 is a cloud metadata service"),
    ("http://[fd00:ec2::254]/latest/meta-data/", "fd00:ec2::254 is a cloud metadata service"),
    ("http://100.100.100.200/latest/meta-data/", "100.100.100.200 is a cloud metadata service"),
    ("http://192.0.0.192/opc/v2/instance/", "192.0.0.192 is a cloud metadata service"),
    ("http://168.63.129.16/machine/", "168.63.129.16 is a cloud metadata service"),
    ("http://169.254.0.23/meta-data/", "169.254.0.23 is a cloud metadata service"),
    # IPv6 spellings of IPv4 addresses are judged by the IPv4 address they carry.
    ("http://[::ffff:169.254.169.254]/", "169.254.169.254 is a cloud metadata service"),
    ("http://[::ffff:10.0.0.1]/", "10.0.0.1 is a private address (RFC 1918)"),
    ("http://[64:ff9b::a9fe:a9fe]/", "169.254.169.254 is a cloud metadata service"),
    ("http://[2002:a00:1::1]/", "10.0.0.1 is a private address (RFC 1918)"),
    ("http://[::127.0.0.1]/", "::7f00:1 is a deprecated IPv4-compatible address"),
    # The C library reads these as 127.0.0.1; they are judged by what they resolve to.
    ("http://2130706433/", "2130706433 resolves to 127.0.0.1, a loopback address"),
    ("http://0177.0.0.1/", "0177.0.0.1 resolves to 127.0.0.1, a loopback address"),
    ("http://0x7f.1/", "0x7f.1 resolves to 127.0.0.1, a loopback address"),
]


@pytest.mark.django_db
@pytest.mark.parametrize(("url", "reason"), REFUSED_ADDRESSES)
def test_a_webhook_to_an_internal_address_is_refused_without_connecting(url, reason, loopback_only):
    incident = make_incident(url)

    with pytest.raises(WebhookFailed) as failed:
        notifications.send_webhook(incident=incident, event="opened")

    assert reason in failed.value.reason
    assert loopback_only == []


@pytest.mark.django_db
def test_a_name_is_refused_when_any_of_its_addresses_is_internal(fake_dns, loopback_only):
    fake_dns.plan(HOOK_HOST, ["93.184.215.14", "10.0.0.5"])
    incident = make_incident(f"https://{HOOK_HOST}/hooks/gpulease")

    with pytest.raises(WebhookFailed) as failed:
        notifications.send_webhook(incident=incident, event="opened")

    assert f"{HOOK_HOST} resolves to 10.0.0.5, a private address (RFC 1918)" in str(failed.value)
    assert fake_dns.lookups == [HOOK_HOST]
    assert loopback_only == []


@pytest.mark.django_db
def test_a_name_that_does_not_resolve_is_a_failed_delivery(loopback_only):
    incident = make_incident("https://hooks.nowhere.example/hook")

    with pytest.raises(WebhookFailed, match=re.escape("hooks.nowhere.example does not resolve")):
        notifications.send_webhook(incident=incident, event="opened")

    assert loopback_only == []


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("ftp://93.184.215.14/hook", "only http and https"),
        ("gopher://93.184.215.14:70/_hook", "only http and https"),
        ("file:///etc/passwd", "only http and https"),
        ("http://ops:hunter2@93.184.215.14/hook", "user name or password"),
        ("http://93.184.215.14:99999/hook", "port"),
        ("http://93.184.215.14:0/hook", "port 0"),
        ("http:///hook", "no host"),
        ("http://[::1/hook", "not a valid URL"),  # urlsplit's ValueError was a 500
    ],
)
def test_a_url_of_the_wrong_shape_is_refused_before_any_lookup(
    url, reason, fake_dns, loopback_only
):
    incident = make_incident(url)

    with pytest.raises(WebhookFailed, match=reason) as failed:
        notifications.send_webhook(incident=incident, event="opened")

    assert "hunter2" not in str(failed.value)
    assert fake_dns.lookups == []
    assert loopback_only == []


# ---------------------------------------------------------------------------------------
# Delivery to a real server on 127.0.0.1.


@dataclass
class Hit:
    host: str
    path: str


@dataclass
class Receiver:
    """One server on 127.0.0.1: plain HTTP, or TLS with a certificate for `tls_name`."""

    port: int = 0
    hits: list[Hit] = field(default_factory=list)
    answer: tuple[int, dict[str, str]] = (200, {})
    server_names: list[str | None] = field(default_factory=list)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with _serve(Receiver()) as running:
        yield running


class _serve:
    def __init__(self, receiver: Receiver, tls: ssl.SSLContext | None = None) -> None:
        self.receiver = receiver
        self.tls = tls

    def __enter__(self) -> Receiver:
        received = self.receiver

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers["Content-Length"]))
                received.hits.append(Hit(self.headers["Host"], self.path))
                status, headers = received.answer
                self.send_response(status)
                for name, value in {"Content-Length": "2", **headers}.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if self.tls is not None:
            self.tls.sni_callback = lambda sock, name, ctx: received.server_names.append(name)
            self.server.socket = self.tls.wrap_socket(self.server.socket, server_side=True)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        received.port = self.server.server_address[1]
        return received

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


@pytest.mark.django_db
def test_loopback_is_refused_by_default_and_the_receiver_hears_nothing(receiver, loopback_only):
    incident = make_incident(f"http://127.0.0.1:{receiver.port}/hooks/gpulease")

    with pytest.raises(WebhookFailed, match=re.escape("127.0.0.1 is a loopback address")):
        notifications.send_webhook(incident=incident, event="opened")

    assert receiver.hits == []
    assert loopback_only == []


@pytest.mark.django_db
def test_loopback_is_delivered_to_once_the_provider_allows_127_0_0_0_8(receiver, allow_loopback):
    incident = make_incident(f"http://127.0.0.1:{receiver.port}/hooks/gpulease")

    notifications.send_webhook(incident=incident, event="opened")

    assert receiver.hits == [Hit(f"127.0.0.1:{receiver.port}", "/hooks/gpulease")]


@pytest.mark.django_db
def test_an_allowed_range_does_not_open_the_ranges_beside_it(settings, loopback_only):
    settings.WEBHOOK_ALLOWED_NETWORKS = [ip_network("10.20.0.0/16")]
    incident = make_incident("http://10.21.0.1/hook")

    with pytest.raises(WebhookFailed, match=re.escape("10.21.0.1 is a private address")):
        notifications.send_webhook(incident=incident, event="opened")

    assert loopback_only == []


@pytest.mark.django_db
def test_no_allowed_range_opens_a_cloud_metadata_service(settings, loopback_only):
    settings.WEBHOOK_ALLOWED_NETWORKS = [ip_network("100.64.0.0/10"), ip_network("::/0")]
    incident = make_incident("http://[::ffff:100.100.100.200]/latest/meta-data/")

    metadata = re.escape("100.100.100.200 is a cloud metadata service")
    with pytest.raises(WebhookFailed, match=metadata):
        notifications.send_webhook(incident=incident, event="opened")

    assert loopback_only == []


@pytest.mark.django_db
@pytest.mark.parametrize("status", [302, 307, 308])
def test_a_redirect_to_the_metadata_service_is_a_failed_delivery_not_followed(
    receiver, allow_loopback, loopback_only, status
):
    receiver.answer = (status, {"Location": "http://169.254.169.254/latest/meta-data/"})
    incident = make_incident(f"http://127.0.0.1:{receiver.port}/hooks/gpulease")

    with pytest.raises(WebhookFailed, match=f"HTTP {status}; redirects are not followed"):
        notifications.send_webhook(incident=incident, event="opened")

    assert len(receiver.hits) == 1
    assert loopback_only == ["127.0.0.1"]


@pytest.mark.django_db
def test_the_checked_address_is_the_one_connected_to_even_if_dns_changes(
    receiver, allow_loopback, fake_dns, loopback_only
):
    # DNS rebinding: the first answer passes the check, every later one is internal.
    fake_dns.plan(HOOK_HOST, ["127.0.0.1"], ["10.0.0.5"])
    incident = make_incident(f"http://{HOOK_HOST}:{receiver.port}/hooks/gpulease")

    notifications.send_webhook(incident=incident, event="opened")

    assert fake_dns.lookups == [HOOK_HOST]
    assert receiver.hits == [Hit(f"{HOOK_HOST}:{receiver.port}", "/hooks/gpulease")]
    assert loopback_only == ["127.0.0.1"]


def certificate_for(name: str, directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate for `name` and its key, as PEM files."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.now(UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / f"{name}.pem", directory / f"{name}.key"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


@pytest.fixture
def tls_receiver(tmp_path, monkeypatch) -> Iterator[Receiver]:
    """An https receiver whose certificate names HOOK_HOST, trusted through SSL_CERT_FILE
    (as an operator would trust an in-house CA)."""
    cert_path, key_path = certificate_for(HOOK_HOST, tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert_path))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_path, key_path)
    with _serve(Receiver(), tls=context) as running:
        yield running


@pytest.mark.django_db
def test_https_to_a_pinned_address_keeps_the_names_sni_host_header_and_certificate_check(
    tls_receiver, allow_loopback, fake_dns, loopback_only
):
    fake_dns.plan(HOOK_HOST, ["127.0.0.1"], ["10.0.0.5"])
    incident = make_incident(f"https://{HOOK_HOST}:{tls_receiver.port}/hooks/gpulease")

    notifications.send_webhook(incident=incident, event="opened")

    assert tls_receiver.server_names == [HOOK_HOST]
    assert tls_receiver.hits == [Hit(f"{HOOK_HOST}:{tls_receiver.port}", "/hooks/gpulease")]
    assert fake_dns.lookups == [HOOK_HOST]


@pytest.mark.django_db
def test_https_refuses_a_certificate_for_another_name(tls_receiver, allow_loopback, fake_dns):
    fake_dns.plan("other.zhiyuan.example", ["127.0.0.1"])
    incident = make_incident(f"https://other.zhiyuan.example:{tls_receiver.port}/hook")

    with pytest.raises(WebhookFailed, match="certificate verify failed"):
        notifications.send_webhook(incident=incident, event="opened")

    assert tls_receiver.hits == []


@pytest.fixture
def silent_server() -> Iterator[int]:
    """Accepts a connection and never answers."""
    listener = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield listener.getsockname()[1]
    stop.set()
    thread.join(timeout=5)
    for connection in accepted:
        connection.close()
    listener.close()


@pytest.mark.django_db
def test_an_endpoint_that_never_answers_fails_after_the_read_timeout(
    silent_server, allow_loopback, settings
):
    settings.WEBHOOK_READ_TIMEOUT_S = 0.5
    incident = make_incident(f"http://127.0.0.1:{silent_server}/hook")

    started = time.monotonic()
    with pytest.raises(WebhookFailed, match="timed out"):
        notifications.send_webhook(incident=incident, event="opened")

    assert 0.4 < time.monotonic() - started < 3


@pytest.fixture
def full_backlog() -> Iterator[int]:
    """A port whose accept queue is full: Linux drops the next SYN, so connect hangs."""
    listener = socket.create_server(("127.0.0.1", 0), backlog=0)
    port = listener.getsockname()[1]
    first = socket.create_connection(("127.0.0.1", port))
    yield port
    first.close()
    listener.close()


@pytest.mark.django_db
def test_an_endpoint_that_does_not_accept_fails_after_the_connect_timeout(
    full_backlog, allow_loopback, settings
):
    settings.WEBHOOK_CONNECT_TIMEOUT_S = 0.3
    settings.WEBHOOK_READ_TIMEOUT_S = 30
    incident = make_incident(f"http://127.0.0.1:{full_backlog}/hook")

    started = time.monotonic()
    with pytest.raises(WebhookFailed, match="could not be reached: timed out"):
        notifications.send_webhook(incident=incident, event="opened")

    assert 0.25 < time.monotonic() - started < 2


@pytest.fixture
def endless_server() -> Iterator[int]:
    """Answers 200 and then streams a body that never ends."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(200)
            self.end_headers()
            try:
                while True:
                    self.wfile.write(b"x" * 65536)
            except OSError:
                pass

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


@pytest.mark.django_db
def test_an_endless_answer_is_read_only_up_to_the_cap(endless_server, allow_loopback):
    incident = make_incident(f"http://127.0.0.1:{endless_server}/hook")

    started = time.monotonic()
    notifications.send_webhook(incident=incident, event="opened")

    assert time.monotonic() - started < 3


# ---------------------------------------------------------------------------------------
# On save: the URL field refuses the same addresses, so an operator hears at once.


class WebhookForm(forms.ModelForm):
    """The model's webhook field as the admin's Tenant form shows it."""

    class Meta:
        model = Tenant
        fields = ["webhook_url"]
        formfield_callback = lambda field, **kw: field.formfield(assume_scheme="https", **kw)  # noqa: E731


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://169.254.169.254/latest/meta-data/", "169.254.169.254 is a cloud metadata service"),
        ("http://127.0.0.1:8000/hook", "127.0.0.1 is a loopback address"),
        ("http://[::ffff:192.168.0.10]/hook", "192.168.0.10 is a private address (RFC 1918)"),
        ("ftp://93.184.215.14/hook", "only http and https"),
        ("http://ops:hunter2@93.184.215.14/hook", "user name or password"),
        ("https://hooks.nowhere.example/hook", "hooks.nowhere.example does not resolve"),
    ],
)
def test_saving_a_webhook_url_refuses_an_internal_or_malformed_target(url, message, loopback_only):
    form = WebhookForm(data={"webhook_url": url})

    assert not form.is_valid()
    assert any(message in error for error in form.errors["webhook_url"])
    assert loopback_only == []


@pytest.mark.django_db
def test_saving_a_name_that_resolves_to_a_private_address_is_refused(fake_dns):
    fake_dns.plan(HOOK_HOST, ["93.184.215.14", "fd00:ec2::254"])
    form = WebhookForm(data={"webhook_url": f"https://{HOOK_HOST}/hooks/gpulease"})

    assert not form.is_valid()
    assert form.errors["webhook_url"] == [
        f"{HOOK_HOST} resolves to fd00:ec2::254, a cloud metadata service; "
        "webhooks are sent only to public addresses."
    ]


@pytest.mark.django_db
@pytest.mark.parametrize(
    "url",
    [
        f"https://{HOOK_HOST}/hooks/gpulease",
        "https://93.184.215.14:8443/hooks/gpulease?tenant=zhiyuan",
        "http://[2606:2800:21f:cb07:6820:80da:af6b:8b2c]/hook",
    ],
)
def test_saving_a_public_webhook_url_is_accepted(url, fake_dns, loopback_only):
    fake_dns.plan(HOOK_HOST, ["93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c"])
    form = WebhookForm(data={"webhook_url": url})

    assert form.is_valid(), form.errors
    assert loopback_only == []


@pytest.mark.django_db
def test_saving_an_address_in_an_allowed_range_is_accepted(settings):
    settings.WEBHOOK_ALLOWED_NETWORKS = [ip_network("10.20.0.0/16")]

    assert WebhookForm(data={"webhook_url": "http://10.20.4.1:9000/hook"}).is_valid()
    assert not WebhookForm(data={"webhook_url": "http://10.21.4.1:9000/hook"}).is_valid()


def test_the_fake_dns_never_asks_a_real_server():
    with pytest.raises(socket.gaierror):
        socket.getaddrinfo("example.com", 443)
    assert ip_address(socket.getaddrinfo("127.1", 80)[0][4][0]) == ip_address("127.0.0.1")
