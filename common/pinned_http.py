"""HTTP(S) to an address that common.egress checked, never to a fresh lookup of the name.

http.client would resolve the host again when it connects, and a name can re-resolve to
an internal address between the check and the connection (DNS rebinding). These
connections open the socket to a checked address themselves and keep the URL's name for
the Host header, the TLS server name (SNI) and the certificate check. No redirect is
followed: http.client never follows one, and the caller sees the 3xx.
"""

import http.client
import socket
import ssl
from dataclasses import dataclass

from common.egress import Destination


@dataclass(frozen=True)
class Answer:
    status: int
    reason: str


def post(
    destination: Destination,
    *,
    body: bytes,
    headers: dict[str, str],
    connect_timeout: float,
    read_timeout: float,
    max_answer_bytes: int,
) -> Answer:
    """POST `body`; read at most `max_answer_bytes` of the answer, then hang up. Raises
    OSError (timeouts and TLS failures included) or http.client.HTTPException."""
    connection = _connection(destination, connect_timeout, read_timeout)
    try:
        connection.request("POST", destination.target, body=body, headers=headers)
        response = connection.getresponse()
        response.read(max_answer_bytes)
        return Answer(response.status, response.reason)
    finally:
        connection.close()


def _connection(
    destination: Destination, connect_timeout: float, read_timeout: float
) -> http.client.HTTPConnection:
    if destination.scheme == "https":
        return _PinnedHTTPSConnection(destination, connect_timeout, read_timeout)
    return _PinnedHTTPConnection(destination, connect_timeout, read_timeout)


class _PinnedHTTPConnection(http.client.HTTPConnection):
    def __init__(self, destination: Destination, connect_timeout: float, read_timeout: float):
        super().__init__(destination.host, destination.port, timeout=read_timeout)
        self.destination = destination
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout

    def connect(self) -> None:
        self.sock = _open_socket(self.destination, self.connect_timeout, self.read_timeout)


class _PinnedHTTPSConnection(http.client.HTTPSConnection):
    def __init__(self, destination: Destination, connect_timeout: float, read_timeout: float):
        # The system's trust store; SSL_CERT_FILE names another (an in-house CA).
        self.tls = ssl.create_default_context()
        super().__init__(destination.host, destination.port, timeout=read_timeout, context=self.tls)
        self.destination = destination
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout

    def connect(self) -> None:
        sock = _open_socket(self.destination, self.connect_timeout, self.read_timeout)
        try:
            self.sock = self.tls.wrap_socket(sock, server_hostname=self.destination.host)
        except BaseException:
            sock.close()
            raise


def _open_socket(
    destination: Destination, connect_timeout: float, read_timeout: float
) -> socket.socket:
    """A TCP connection to the first checked address that answers."""
    failure: OSError = OSError(f"{destination.host} has no checked address")
    for address in destination.addresses:
        family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.settimeout(connect_timeout)
            sock.connect((str(address), destination.port))
        except OSError as error:
            sock.close()
            failure = error
            continue
        sock.settimeout(read_timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock
    raise failure
