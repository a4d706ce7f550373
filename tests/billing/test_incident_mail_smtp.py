"""Incident e-mail through a real SMTP server (aiosmtpd, started here on a free port) with
the settings that config/settings.py reads from the environment: STARTTLS with a login
(the submission port's way), and implicit TLS; the server's certificate is a self-signed
one made here and trusted through SSL_CERT_FILE, as an in-house CA would be. The message
is read back as the server received it."""

import datetime as dt
import email
import ipaddress
import runpy
import smtplib
import ssl
import threading
import time
from email.message import EmailMessage
from email.policy import default as default_policy
from pathlib import Path

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from django.db import connections

from incidents import notifications
from incidents.tasks import notify_incident
from tests.billing.test_notifications import make_incident
from tests.deploy.neighbours import free_port, silent_listener

SETTINGS = Path(__file__).resolve().parents[2] / "config" / "settings.py"
MAIL_SETTINGS = (
    "EMAIL_BACKEND",
    "EMAIL_HOST",
    "EMAIL_PORT",
    "EMAIL_HOST_USER",
    "EMAIL_HOST_PASSWORD",
    "EMAIL_USE_TLS",
    "EMAIL_USE_SSL",
    "EMAIL_TIMEOUT",
    "DEFAULT_FROM_EMAIL",
    "SERVER_EMAIL",
)
USER, PASSWORD = "gpulease-noc", "s3cret-smtp-pass"
SENDER = "gpulease NOC <noc@gpulease.example.cn>"


def self_signed(directory: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "smtp.crt", directory / "smtp.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


class Mailbox:
    def __init__(self) -> None:
        self.messages: list[tuple[str, list[str], EmailMessage]] = []
        self.logins: list[str] = []

    async def handle_DATA(self, server, session, envelope):  # type: ignore[no-untyped-def]
        parsed = email.message_from_bytes(envelope.content, policy=default_policy)
        self.messages.append((envelope.mail_from, list(envelope.rcpt_tos), parsed))
        return "250 OK"


def authenticator(mailbox: Mailbox):  # type: ignore[no-untyped-def]
    def check(server, session, envelope, mechanism, auth_data):  # type: ignore[no-untyped-def]
        good = isinstance(auth_data, LoginPassword) and (
            auth_data.login.decode(),
            auth_data.password.decode(),
        ) == (USER, PASSWORD)
        if good:
            mailbox.logins.append(USER)
        return AuthResult(success=good)

    return check


def mail_settings_from(env: dict[str, str], monkeypatch, tmp_path) -> dict[str, object]:  # type: ignore[no-untyped-def]
    """What config/settings.py makes of these environment variables."""
    for name, value in {"GPULEASE_VAR_DIR": str(tmp_path), "SECRET_KEY": "x" * 50, **env}.items():
        monkeypatch.setenv(name, value)
    namespace = runpy.run_path(str(SETTINGS))
    return {name: namespace[name] for name in MAIL_SETTINGS}


@pytest.fixture
def tls_files(tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    cert, key = self_signed(tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # the client trusts this CA alone
    return cert, key


def server_context(cert: Path, key: Path) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    return context


@pytest.mark.django_db
@pytest.mark.parametrize("mode", ["starttls", "implicit_tls"])
# aiosmtpd's warning does not know that an implicit-TLS session is TLS from its first byte.
@pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS:UserWarning")
def test_an_incident_mail_reaches_a_real_smtp_server(
    mode, tls_files, tmp_path, monkeypatch, settings
):
    mailbox = Mailbox()
    port = free_port()
    context = server_context(*tls_files)
    if mode == "starttls":
        controller = Controller(
            mailbox,
            hostname="127.0.0.1",
            port=port,
            tls_context=context,
            require_starttls=True,
            auth_required=True,
            authenticator=authenticator(mailbox),
        )
        env = {"EMAIL_USE_TLS": "true", "EMAIL_HOST": "localhost"}
    else:
        controller = Controller(
            mailbox,
            hostname="127.0.0.1",
            port=port,
            ssl_context=context,
            auth_required=True,
            auth_require_tls=False,  # the whole session is TLS already
            authenticator=authenticator(mailbox),
        )
        env = {"EMAIL_USE_SSL": "true", "EMAIL_HOST": "127.0.0.1"}
    env |= {
        "EMAIL_PORT": str(port),
        "EMAIL_HOST_USER": USER,
        "EMAIL_HOST_PASSWORD": PASSWORD,
        "EMAIL_FROM": SENDER,
        "EMAIL_TIMEOUT_S": "5",
    }
    configured = mail_settings_from(env, monkeypatch, tmp_path)
    assert configured["EMAIL_BACKEND"] == "django.core.mail.backends.smtp.EmailBackend"
    for name, value in configured.items():
        setattr(settings, name, value)
    incident = make_incident(email="noc@zhiyuan.example.cn")

    controller.start()
    try:
        result = notify_incident.apply(args=[incident.pk, "opened"])
    finally:
        controller.stop()

    assert result.successful(), result.traceback
    assert mailbox.logins == [USER]
    [(mail_from, recipients, message)] = mailbox.messages
    assert mail_from == "noc@gpulease.example.cn"
    assert recipients == ["noc@zhiyuan.example.cn"]
    assert message["From"] == SENDER
    assert message["To"] == "noc@zhiyuan.example.cn"
    assert message["Subject"] == "[gpulease] Incident opened: LAB-1 throughput lab-h1>lab-h3"
    assert message["Message-ID"] and message["Date"]
    text = message.get_body(preferencelist=("plain",)).get_content()
    html = message.get_body(preferencelist=("html",)).get_content()
    assert "2026-11-29 10:05 (Asia/Shanghai)" in text
    assert "412.3 Mbit/s" in text
    assert "throughput &gt;= 95% of 1 Gbps" in html
    incident.refresh_from_db()
    assert incident.notified_open_at is not None


@pytest.mark.django_db
def test_starttls_is_refused_when_the_certificate_is_not_trusted(tmp_path, monkeypatch, settings):
    """No SSL_CERT_FILE naming the server's CA: the mail is not sent in the clear instead."""
    cert, key = self_signed(tmp_path)
    mailbox = Mailbox()
    port = free_port()
    controller = Controller(
        mailbox,
        hostname="127.0.0.1",
        port=port,
        tls_context=server_context(cert, key),
        require_starttls=True,
    )
    env = {"EMAIL_HOST": "localhost", "EMAIL_PORT": str(port), "EMAIL_USE_TLS": "true"}
    for name, value in mail_settings_from(env, monkeypatch, tmp_path).items():
        setattr(settings, name, value)
    incident = make_incident()
    controller.start()
    try:
        with pytest.raises(ssl.SSLCertVerificationError):
            notifications.send_email(incident=incident, event="opened")
    finally:
        controller.stop()
    assert mailbox.messages == []


@pytest.mark.django_db
def test_a_mail_server_that_never_answers_fails_within_the_timeout(tmp_path, monkeypatch, settings):
    """Django's default is to wait forever: a worker would hang on the greeting."""
    incident = make_incident()
    with silent_listener() as port:
        env = {"EMAIL_HOST": "127.0.0.1", "EMAIL_PORT": str(port), "EMAIL_TIMEOUT_S": "1"}
        for name, value in mail_settings_from(env, monkeypatch, tmp_path).items():
            setattr(settings, name, value)
        outcome: list[BaseException] = []

        def send() -> None:
            try:
                notifications.send_email(incident=incident, event="opened")
            except BaseException as error:
                outcome.append(error)
            finally:
                connections.close_all()  # this thread's own

        started = time.monotonic()
        sender = threading.Thread(target=send, daemon=True)
        sender.start()
        sender.join(timeout=10)
        elapsed = time.monotonic() - started
    assert not sender.is_alive(), "still waiting for the server's greeting"
    assert elapsed < 3
    [error] = outcome  # an SMTPException: the notification task retries it with backoff
    assert isinstance(error, smtplib.SMTPServerDisconnected) and "timed out" in str(error)


def test_tls_and_ssl_together_stop_the_start(tmp_path, monkeypatch):
    from django.core.exceptions import ImproperlyConfigured

    with pytest.raises(ImproperlyConfigured, match="one of EMAIL_USE_TLS"):
        mail_settings_from(
            {"EMAIL_USE_TLS": "true", "EMAIL_USE_SSL": "true"}, monkeypatch, tmp_path
        )
