"""Servers for goldens at URLs, on 127.0.0.1 only: a static file server that answers Range
requests (the standard library's ignores them), over HTTPS with a certificate made here when
asked, and an S3-compatible one (moto in server mode). Used by tests/store/test_remote.py and
tools/bench_remote.py. Python 3.7 syntax; cryptography and moto are imported when used."""

from __future__ import annotations

import contextlib
import datetime
import email.utils
import http.server
import ipaddress
import os
import re
import ssl
import threading
from typing import Dict, Iterator, List, Optional, Tuple

_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")
PIECE = 1 << 20  # what the server writes at a time


class RangedServer:
    """Serves the files of `root` (its top level) at http(s)://127.0.0.1:PORT/NAME, with Range
    requests (one range: a-b, a-, -n), ETag and Last-Modified, on threads. `ranges=False`:
    answers every GET with the whole file, as a server without range support does; `validators=False`:
    no ETag or Last-Modified. `sent` counts the body bytes written (before each write, so a client
    that got them finds them counted); `requests` lists (method, path, range)."""

    def __init__(self, root: str, ranges: bool = True, validators: bool = True,
                 tls: Optional[Tuple[str, str]] = None) -> None:
        self.root, self.ranges, self.validators = root, ranges, validators
        self.sent = 0
        self.requests: List[Tuple[str, str, Optional[str]]] = []
        self._lock = threading.Lock()
        self._context = None
        if tls is not None:  # (certificate, key) files
            self._context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self._context.load_cert_chain(*tls)
        self._httpd = _Server(("127.0.0.1", 0), _Handler, self)
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="ranged-server", daemon=True)

    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    def url(self, name: str = "") -> str:
        return "%s://127.0.0.1:%d/%s" % ("https" if self._context is not None else "http", self.port, name)

    def counted(self, method: str, path: str, ranged: Optional[str], nbytes: int) -> None:
        with self._lock:
            self.sent += nbytes
            if method:
                self.requests.append((method, path, ranged))

    def reset(self) -> None:
        with self._lock:
            self.sent = 0
            self.requests = []

    def __enter__(self) -> "RangedServer":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: Tuple[str, int], handler: type, owner: RangedServer) -> None:
        super().__init__(address, handler)
        self.owner = owner

    def finish_request(self, request, client_address):  # type: ignore[no-untyped-def]
        # TLS on the connection's own thread: a slow handshake does not hold up accept().
        if self.owner._context is not None:
            request = self.owner._context.wrap_socket(request, server_side=True)
        super().finish_request(request, client_address)

    def handle_error(self, request, client_address):  # type: ignore[no-untyped-def]
        pass  # a client that hung up mid-body, a refused certificate: the client reports it


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as aiohttp expects
    server: _Server

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_HEAD(self) -> None:
        self._serve(body=False)

    def do_GET(self) -> None:
        self._serve(body=True)

    def _serve(self, body: bool) -> None:
        owner = self.server.owner
        name = self.path.split("?", 1)[0].lstrip("/")
        path = os.path.join(owner.root, name)
        asked = self.headers.get("Range") if owner.ranges else None
        owner.counted(self.command, name, asked, 0)
        if not name or "/" in name or not os.path.isfile(path):
            return self._empty(404)
        with open(path, "rb") as fh:
            st = os.fstat(fh.fileno())
            size, start, end = st.st_size, 0, st.st_size - 1
            found = _RANGE.match(asked or "")
            if asked is not None:
                if found is None or found.group(1) == found.group(2) == "":
                    return self._empty(416, {"Content-Range": "bytes */%d" % size})
                if found.group(1) == "":  # the last n bytes
                    start = max(0, size - int(found.group(2)))
                else:
                    start = int(found.group(1))
                    end = min(end, int(found.group(2))) if found.group(2) else end
                if start > end or start >= size:
                    return self._empty(416, {"Content-Range": "bytes */%d" % size})
            self.send_response(206 if asked is not None else 200)
            self.send_header("Content-Type", "application/x-hdf5")
            self.send_header("Content-Length", str(end - start + 1))
            if asked is not None:
                self.send_header("Content-Range", "bytes %d-%d/%d" % (start, end, size))
            if owner.ranges:
                self.send_header("Accept-Ranges", "bytes")
            if owner.validators:  # as nginx makes them, the inode added: a replaced file gets a new one
                self.send_header("ETag", '"%x-%x-%x"' % (st.st_ino, st.st_mtime_ns, size))
                self.send_header("Last-Modified", email.utils.formatdate(st.st_mtime, usegmt=True))
            self.end_headers()
            if body:
                fh.seek(start)
                left = end - start + 1
                while left > 0:
                    piece = fh.read(min(PIECE, left))
                    owner.counted("", name, None, len(piece))  # before the client can have it: no race
                    self.wfile.write(piece)
                    left -= len(piece)

    def _empty(self, status: int, headers: Optional[Dict[str, str]] = None) -> None:
        self.send_response(status)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Length", "0")
        self.end_headers()


def self_signed(folder: str) -> Tuple[str, str]:
    """A certificate for 127.0.0.1 and localhost, signed by its own key (its own CA: a client
    trusts it through SSL_CERT_FILE or an SSL context); returns (certificate, key) files."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "tracekit test server")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                                                        x509.DNSName("localhost")]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, content_commitment=False,
                                         key_encipherment=False, data_encipherment=False, key_agreement=False,
                                         crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = os.path.join(folder, "server.crt"), os.path.join(folder, "server.key")
    with open(cert_path, "wb") as fh:
        fh.write(cert.public_bytes(serialization.Encoding.PEM))
    with open(key_path, "wb") as fh:
        fh.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                   serialization.NoEncryption()))
    return cert_path, key_path


# What an S3 client reads from its environment, pointed at the local server: no profile, no
# instance metadata, no proxy, no configuration file of the user's.
def s3_environment(endpoint: str, folder: str) -> Dict[str, str]:
    return {"AWS_ENDPOINT_URL_S3": endpoint, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true",
            "AWS_CONFIG_FILE": os.path.join(folder, "no-aws-config"),
            "AWS_SHARED_CREDENTIALS_FILE": os.path.join(folder, "no-aws-credentials"),
            "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}


@contextlib.contextmanager
def moto_s3() -> Iterator[str]:
    """An S3-compatible server (moto's) on 127.0.0.1 in a thread; yields its endpoint URL."""
    import logging

    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        yield "http://%s:%d" % (host, port)
    finally:
        server.stop()


def random_golden(path: str, steps: int, shape: Tuple[int, ...], seed: int = 0) -> str:
    """A golden of random float32 tensors (which compress hardly at all): each step holds a loss,
    a gradient and a variable of `shape`."""
    import numpy as np

    import tracekit

    rng = np.random.default_rng(seed)
    with tracekit.create(path, meta={"user": {"seed": seed}}) as writer:
        for k in range(steps):
            with writer.step(info={"global_step": k + 1}):
                writer.add("loss", "loss", np.float32(rng.standard_normal()))
                writer.add("grad", "dense/kernel:0", rng.standard_normal(shape, dtype=np.float32))
                writer.add("var", "dense/kernel:0", rng.standard_normal(shape, dtype=np.float32))
    return path
