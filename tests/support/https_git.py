"""A local HTTPS git server (git's "dumb" HTTP protocol) behind basic auth, with its own CA: a real URL with
credentials in it that git can fetch from, offline."""

from __future__ import annotations

import base64
import datetime
import ipaddress
import ssl
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


@dataclass
class Served:
    """The running server: its base URL (without credentials), the CA file git must trust, what it saw."""

    url: str
    ca_file: Path
    authorized: list[str] = field(default_factory=list)  # paths served to a client with the right password
    refused: int = 0
    headers: list[str] = field(default_factory=list)  # every Authorization header a client sent, right or wrong


def _certificate(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (its own CA) and its key."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_file, key_file = folder / "ca.pem", folder / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_file, key_file


@contextmanager
def https_git(repos: dict[str, Path], folder: Path, user: str, password: str) -> Iterator[Served]:
    """Serve bare copies of `repos` (name -> repository) as https://127.0.0.1:PORT/<name>.git."""
    root = folder / "www"
    root.mkdir(parents=True)
    for name, repo in repos.items():
        bare = root / f"{name}.git"
        subprocess.run(["git", "clone", "--quiet", "--bare", str(repo), str(bare)], check=True)
        subprocess.run(["git", "update-server-info"], cwd=bare, check=True)
    cert_file, key_file = _certificate(folder)
    expected = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
    served = Served(url="", ca_file=cert_file)

    class Handler(SimpleHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.headers.get("Authorization") is not None:
                served.headers.append(self.headers["Authorization"])
            if self.headers.get("Authorization") != expected:
                served.refused += 1
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="git"')
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            served.authorized.append(self.path)
            super().do_GET()

        def log_message(self, *_args: object) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(Handler, directory=str(root)))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_file, key_file)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    served.url = f"https://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield served
    finally:
        server.shutdown()
        server.server_close()
