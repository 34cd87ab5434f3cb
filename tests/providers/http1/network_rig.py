"""A corporate network in a test: a private CA (made here with `cryptography`), TLS upstreams it
signed, and Debian's tinyproxy as the forward proxy between them, started on a free port with its
own config and log. `.ci/run` installs tinyproxy; elsewhere a missing one skips (under CI, fails)."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import os
import shutil
import socket
import socketserver
import ssl
import subprocess
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
OK = b'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 11\r\n\r\n{"ok":true}'


def _key_pem(key: ec.EllipticCurvePrivateKey, passphrase: bytes | None = None) -> bytes:
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(passphrase) if passphrase else serialization.NoEncryption()
    )
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)


class PrivateCA:
    """A root no system trusts, and the certificates it issues, written as PEM files in `folder`."""

    def __init__(self, folder: Path, name: str = "Tollgate Test Root") -> None:
        self.folder = folder
        self._key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = datetime.datetime.now(datetime.UTC)
        self._name = subject
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                    key_encipherment=False, data_encipherment=False, key_agreement=False,
                    encipher_only=False, decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(self._key.public_key()), critical=False)
            .sign(self._key, hashes.SHA256())
        )  # fmt: skip
        self.ca_file = folder / f"{name.replace(' ', '_')}.pem"
        self.ca_file.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))

    def issue(self, name: str, *, client: bool = False, passphrase: bytes | None = None) -> tuple[Path, Path]:
        """(cert file, key file) for `name`: a server certificate for localhost and 127.0.0.1, or a
        client one."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(self._name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()), critical=False
            )
        )
        if client:
            usage = ExtendedKeyUsageOID.CLIENT_AUTH
        else:
            usage = ExtendedKeyUsageOID.SERVER_AUTH
            builder = builder.add_extension(
                x509.SubjectAlternativeName(
                    [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
                ),
                critical=False,
            )
        cert = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False).sign(
            self._key, hashes.SHA256()
        )
        cert_file, key_file = self.folder / f"{name}.crt", self.folder / f"{name}.key"
        cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_file.write_bytes(_key_pem(key, passphrase))
        return cert_file, key_file

    def server_context(self, *, require_client_cert: bool = False) -> ssl.SSLContext:
        cert, key = self.issue("localhost")
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(cert, key)
        if require_client_cert:
            context.verify_mode = ssl.CERT_REQUIRED
            context.load_verify_locations(cafile=str(self.ca_file))
        return context


class Upstream:
    """An asyncio server (TLS when given a context) that answers every request with OK, counting
    connections, the ones closed, and the SNI names it was asked for."""

    def __init__(self, tls: ssl.SSLContext | None = None, handler: Handler | None = None) -> None:
        self.tls = tls
        self.handler = handler or answer_ok
        self.connections = 0
        self.closed = 0
        self.server_names: list[str | None] = []
        self.server: asyncio.Server | None = None
        self.port = 0
        if tls is not None:
            tls.sni_callback = self._sni

    def _sni(self, sock: ssl.SSLObject, name: str | None, context: ssl.SSLContext) -> None:
        self.server_names.append(name)

    async def start(self) -> Upstream:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self.tls)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            await self.handler(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
            pass
        finally:
            self.closed += 1
            writer.close()

    def url(self, host: str = "localhost") -> str:
        scheme = "https" if self.tls is not None else "http"
        return f"{scheme}://{host}:{self.port}/v1/chat/completions"

    def close(self) -> None:
        if self.server is not None:
            self.server.close()


async def answer_ok(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Keep-alive: OK to every request on the connection until the client closes it."""
    while True:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length")
        )
        await reader.readexactly(length)
        writer.write(OK)
        await writer.drain()


class BlockingTLSUpstream:
    """A TLS upstream on blocking sockets in a thread, for what asyncio's servers cannot show: a
    refused client certificate told with an alert (they drop the connection before writing it),
    as nginx or OpenSSL's own server tell it."""

    def __init__(self, tls: ssl.SSLContext) -> None:
        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                try:
                    with tls.wrap_socket(self.request, server_side=True) as conn:
                        data = b""
                        while b"\r\n\r\n" not in data:
                            data += conn.recv(65536) or b"\r\n\r\n"
                        head, _, body = data.partition(b"\r\n\r\n")
                        length = int(head.lower().partition(b"content-length:")[2].split(b"\r\n")[0] or 0)
                        while len(body) < length:  # all of it: unread bytes at close mean a reset
                            body += conn.recv(65536) or b" " * length
                        conn.sendall(OK)
                except (OSError, ssl.SSLError):
                    pass  # the refusals the tests are about

        self._server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port: int = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> BlockingTLSUpstream:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def url(self) -> str:
        return f"https://localhost:{self.port}/v1/chat/completions"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Tinyproxy:
    """tinyproxy in the foreground on a free port; `log()` is what it wrote about each request."""

    def __init__(
        self, folder: Path, *, basic_auth: tuple[str, str] | None = None, connect_ports: tuple[int, ...] = ()
    ) -> None:
        binary = shutil.which("tinyproxy") or next(
            (p for p in ("/usr/bin/tinyproxy", "/usr/sbin/tinyproxy") if os.path.exists(p)), None
        )
        if binary is None:
            message = "tinyproxy is not installed (apt-get install tinyproxy; .ci/run does)"
            if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
                pytest.fail(f"CI=true: {message}")
            pytest.skip(message)
        self.port = free_port()
        self.log_file = folder / f"tinyproxy-{self.port}.log"
        lines = [
            f"Port {self.port}",
            "Listen 127.0.0.1",
            "Timeout 30",
            f'LogFile "{self.log_file}"',
            "LogLevel Connect",
            "MaxClients 50",
            "Allow 127.0.0.1",
        ]
        if basic_auth is not None:
            lines.append(f"BasicAuth {basic_auth[0]} {basic_auth[1]}")
        lines += [f"ConnectPort {port}" for port in connect_ports]
        self.config = folder / f"tinyproxy-{self.port}.conf"
        self.config.write_text("\n".join(lines) + "\n")
        self._process = subprocess.Popen(
            [binary, "-d", "-c", str(self.config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                break
            except OSError:
                if self._process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"tinyproxy did not start: {self.log()}") from None
                time.sleep(0.02)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        return self.log_file.read_text() if self.log_file.exists() else ""

    def requests(self) -> list[str]:
        """The request lines tinyproxy logged ("CONNECT localhost:443 HTTP/1.1", "POST http://…")."""
        return [
            line.split("): ", 1)[1] for line in self.log().splitlines() if "Request (file descriptor" in line
        ]

    def stop(self) -> None:
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(5)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
