"""Goldens at URLs (https://, s3://, gs://, anything fsspec opens), read lazily, never written.

`tracekit.open(url)` reads a golden through a `RemoteGolden`: a read-only, seekable file object
that h5py opens like a file. It fetches the golden in blocks of BLOCK_SIZE bytes with ranged
requests, only the blocks HDF5 asks for, consecutive missing blocks in one request; opening a
golden and reading one step fetches the metadata HDF5 reads and that step's chunks, not the file.

Fetched blocks are kept on local disk under cache_dir()/ranges/<key>/, where <key> is a hash of
what identifies the golden's content: the first HEAD bytes of the file (the user block holding
the recording's token, which no other recording shares, and the HDF5 signature), its size, and
the validators the server gives (ETag, Last-Modified, S3 and GCS checksums, version ids). Those
first bytes are fetched at every opening, never taken from the cache: another golden put at
the same URL has another token, another size or another validator, so it gets a new key and
no block of the old one is read for it. A block is written to a temporary file and renamed
into place, with its crc32 after it: a torn or damaged block fails its check and is fetched
again. Removing the folder (or anything in it) at any time only costs fetching again.

Remote goldens are not screened (_screen.py): the walk reads every byte, which is what ranged
reads avoid. Values are still checked as they are read (every chunk's crc32 or zstd checksum),
and `tracekit show` and `verify` read in a child process anyway (docs/ROBUSTNESS.md).

Transport and credentials are fsspec's (aiohttp for http/https, s3fs, gcsfs): its usual
environment variables and configuration apply (AWS_ENDPOINT_URL_S3, AWS_PROFILE, SSL_CERT_FILE,
FSSPEC_CONFIG_DIR, ...). fsspec is imported only when a URL is opened (the `remote` extra).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import ssl
import tempfile
import threading
import zlib
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from ..errors import GoldenNotFound, MissingDependency, RemoteError, UsageError
from ._format import HDF5_SIGNATURE, USERBLOCK_MAGIC, USERBLOCK_SIZE
from ._screen import cache_dir

# HDF5 keeps a golden's metadata between its chunks, so small blocks fetch less of what is not read:
# opening a 42 MB golden of 48 steps fetched 1.1% of it with 128 KiB blocks, 8.5% with 1 MiB ones.
# A read that goes on where the last fetch ended fetches ahead (MAX_AHEAD): reading that golden
# through took 33 requests, 13 with 1 MiB blocks.
BLOCK_SIZE = 128 << 10
MAX_AHEAD = 64  # blocks (8 MiB)
HEAD = USERBLOCK_SIZE + len(HDF5_SIGNATURE)  # fetched at each opening: the golden's identity and signature
MEMORY_BLOCKS = 128  # the last blocks read, kept in memory: HDF5 reads metadata a few bytes at a time
RANGES = "ranges"  # the folder of fetched blocks under cache_dir()
# What servers say that changes when the content does (fsspec's info keys for http, s3, gcs).
VALIDATORS = ("ETag", "etag", "Content-MD5", "Digest", "md5Hash", "crc32c", "generation", "VersionId",
              "LastModified", "Last-Modified", "updated", "mtime")
INSTALL = "pip install 'tracekit[remote]'"

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def is_url(path: Any) -> bool:
    """A string with a URL scheme (scheme://...), not a local path."""
    return isinstance(path, str) and _SCHEME.match(path) is not None


def refuse_url(path: Any, what: str) -> None:
    """UsageError if `path` is a URL: goldens are read from URLs, written locally."""
    if is_url(path):
        raise UsageError("%s is a URL: tracekit does not %s at a URL; goldens are read from URLs and written to "
                         "local paths (write it locally, then upload it: docs/GOLDENS.md)" % (path, what))


@dataclass
class Transfer:
    """What was fetched from servers: bytes of content and requests for them."""

    bytes: int = 0
    requests: int = 0

    def add(self, nbytes: int) -> None:
        self.bytes += nbytes
        self.requests += 1


fetched = Transfer()  # by this process, every golden together (tools/bench_remote.py, tests)

# Every filesystem this process used stays referenced. A forked child (show and verify read in one)
# gets fsspec's instances dropped: one closed there would take its pooled connections out of the
# parent's event loop, whose epoll descriptor the child shares (the parent's next read then hangs).
_used: Dict[int, Any] = {}


def _filesystem(url: str) -> Tuple[Any, str]:
    """fsspec's filesystem for the URL, and the path on it."""
    try:
        from fsspec.core import url_to_fs
        from fsspec.registry import known_implementations
    except ImportError:
        raise MissingDependency("reading %s needs fsspec, which is not installed: %s" % (url, INSTALL)) from None
    try:
        fs, path = url_to_fs(url)
    except ImportError as exc:  # the protocol's package (s3fs, gcsfs, aiohttp) is missing
        protocol = url.split("://", 1)[0]
        said = known_implementations.get(protocol, {}).get("err") or str(exc)
        raise MissingDependency("reading %s needs a package that is not installed (%s): %s" % (
            url, said, INSTALL if protocol in ("http", "https", "s3", "s3a") else "pip install it")) from None
    except ValueError as exc:  # no implementation for the protocol at all
        raise UsageError("%s: fsspec cannot open this kind of URL (%s)" % (url, exc)) from None
    _used[id(fs)] = fs
    return fs, path


def _failure(url: str, exc: BaseException, doing: str) -> Exception:
    """The error to raise for what fsspec (aiohttp, s3fs, ...) raised: one line, the URL and what to do."""
    chain: List[BaseException] = []
    cause: Optional[BaseException] = exc
    while cause is not None and len(chain) < 8:
        chain.append(cause)
        cause = cause.__cause__ or cause.__context__
    statuses = [getattr(e, "status", None) for e in chain]  # aiohttp's HTTP status
    status = next((s for s in statuses if isinstance(s, int)), None)
    said = [str(e) for e in chain[1:] + chain[:1] if str(e) and not url.endswith(str(e))]  # the cause first
    text = "; ".join(dict.fromkeys(said))[:300] or type(exc).__name__
    if status in (401, 403) or any(isinstance(e, PermissionError) for e in chain):
        return RemoteError("%s: access denied while %s (%s): give fsspec credentials (for s3:// AWS_PROFILE or "
                           "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, for gs:// GOOGLE_APPLICATION_CREDENTIALS)"
                           % (url, doing, text))
    if any(isinstance(e, ssl.SSLError) for e in chain):
        return RemoteError("%s: the TLS connection failed while %s (%s); for a server whose certificate this "
                           "machine does not trust, point SSL_CERT_FILE at its CA certificate" % (url, doing, text))
    if any("range requests" in str(e) for e in chain):
        return RemoteError("%s: the server does not serve byte ranges (it sent the whole file for a ranged "
                           "request); tracekit reads goldens at URLs by ranges only: serve it from a server that "
                           "supports Range requests (any static file server, S3, GCS), or download it" % url)
    # fsspec's http says FileNotFoundError for any failure to ask: a connection that failed is an OSError in it.
    if status == 404 or (status is None and isinstance(exc, FileNotFoundError) and
                         not any(isinstance(e, OSError) and not isinstance(e, FileNotFoundError) for e in chain)):
        return GoldenNotFound("no golden at %s (%s): check the URL" % (
            url, "the server answered 404 Not Found" if status == 404 else text if said else "it does not exist"))
    return RemoteError("%s: %s failed (%s); check the URL and that the server is reachable, then try again"
                       % (url, doing, text))


def open_url(url: str) -> "RemoteGolden":
    """The golden at `url` as a file object h5py can read: GoldenNotFound if there is none,
    RemoteError if it cannot be fetched by ranges, MissingDependency without fsspec."""
    fs, path = _filesystem(url)
    try:
        fs.invalidate_cache(path)  # a listing cached by this process must not vouch for a file since replaced
        info = fs.info(path)
    except Exception as exc:  # noqa: BLE001  # every transport raises its own: reworded by _failure
        raise _failure(url, exc, "asking for the file's size") from None
    if info.get("type") == "directory":
        raise UsageError("%s is a folder, not a golden: name the .h5 file in it" % url)
    if info.get("size") is None:
        raise RemoteError("%s: the server does not say how big the file is (no Content-Length); tracekit reads "
                          "goldens at URLs by byte ranges, which needs it: serve it from a static file server" % url)
    if info.get("partial") is False:
        raise RemoteError("%s: the server says it serves no byte ranges (Accept-Ranges: none); tracekit reads "
                          "goldens at URLs by ranges only: serve it from a server that supports Range requests "
                          "(any static file server, S3, GCS), or download it" % url)
    validators = {name: str(info[name]) for name in VALIDATORS if info.get(name) not in (None, "")}
    return RemoteGolden(url, fs, path, int(info["size"]), validators)


class RemoteGolden(io.RawIOBase):
    """A golden at a URL as a read-only, seekable file whose reads fetch ranges (kept on disk).
    `head` holds its first HEAD bytes; `fetched` what this object fetched. Thread-safe."""

    def __init__(self, url: str, fs: Any, path: str, size: int, validators: Dict[str, str]) -> None:
        super().__init__()
        self.url, self.size, self.validators = url, size, validators
        self.fetched = Transfer()
        self.failure: Optional[Exception] = None  # the last fetch that failed: HDF5 may report it as damage
        self._fs, self._path = fs, path
        self._handle: Any = None
        self._pid = os.getpid()  # a forked child reopens: the parent's connections are not its own
        self._pos = 0
        self._lock = threading.RLock()
        self._memory: "OrderedDict[int, bytes]" = OrderedDict()
        self._streams: "OrderedDict[int, int]" = OrderedDict()  # where recent fetches ended -> their length
        self.head = self._fetch(0, min(HEAD, size))  # never from the cache: it says which cache applies
        self.key = identity(url, self.head, size, validators)
        self.folder: Optional[str] = os.path.join(cache_dir(), RANGES, self.key)
        self._folder_ready = False  # made, with its about.json, at the first block kept
        if size > BLOCK_SIZE:  # the end holds what HDF5 reads first; asked now, a server without ranges says so
            self._blocks(self._block_count() - 1, self._block_count() - 1)

    # -- io.RawIOBase ------------------------------------------------------------------------
    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self.size}[whence]
        if base + offset < 0:
            raise ValueError("negative seek position %d" % (base + offset))
        self._pos = base + offset
        return self._pos

    def readinto(self, buffer: Any) -> int:
        out = memoryview(buffer).cast("B")
        with self._lock:
            start = self._pos
            end = min(self.size, start + len(out))
            if end <= start:
                return 0
            first, last = start // BLOCK_SIZE, (end - 1) // BLOCK_SIZE
            done = 0
            for index, block in zip(range(first, last + 1), self._blocks(first, last)):
                lo = max(start, index * BLOCK_SIZE) - index * BLOCK_SIZE
                hi = min(end, (index + 1) * BLOCK_SIZE) - index * BLOCK_SIZE
                out[done:done + hi - lo] = block[lo:hi]
                done += hi - lo
            self._pos = end
            return done

    def close(self) -> None:
        with self._lock:
            if self._handle is not None and self._pid == os.getpid():
                try:
                    self._handle.close()
                except Exception:  # noqa: BLE001  # a connection already gone: nothing left to release
                    pass
            self._handle = None
            self._memory.clear()
        super().close()

    # -- blocks ------------------------------------------------------------------------------
    def _block_count(self) -> int:
        return (self.size + BLOCK_SIZE - 1) // BLOCK_SIZE

    def _blocks(self, first: int, last: int) -> List[bytes]:
        """Blocks first..last: from memory, else the disk, else fetched (each run of missing ones in one request)."""
        found: Dict[int, bytes] = {}
        missing: List[int] = []
        for index in range(first, last + 1):
            block = self._memory.get(index)
            if block is not None:
                self._memory.move_to_end(index)
            else:
                block = self._from_disk(index)
            if block is None:
                missing.append(index)
            else:
                found[index] = block
        for run in _runs(missing):
            ahead = self._ahead(run)
            data = self._fetch(run[0] * BLOCK_SIZE, min(self.size, (ahead[-1] + 1) * BLOCK_SIZE))
            for index in ahead:
                block = data[(index - run[0]) * BLOCK_SIZE:(index - run[0] + 1) * BLOCK_SIZE]
                if first <= index <= last:
                    found[index] = block
                else:
                    self._remember(index, block)
                self._to_disk(index, block)
        for index in range(first, last + 1):
            self._remember(index, found[index])
        return [found[index] for index in range(first, last + 1)]

    def _remember(self, index: int, block: bytes) -> None:
        self._memory[index] = block
        self._memory.move_to_end(index)
        while len(self._memory) > MEMORY_BLOCKS:
            self._memory.popitem(last=False)

    def _ahead(self, run: List[int]) -> List[int]:
        """The blocks to fetch for a run of missing ones: a miss where a recent fetch ended (HDF5
        reading a golden through) reads on twice as far as that fetch did, up to MAX_AHEAD blocks,
        over one block kept already (HDF5 reads a step's group, at the end of its chunks, first);
        any other miss fetches what was asked alone."""
        window = min(2 * self._streams.pop(run[0]), MAX_AHEAD) if run[0] in self._streams else 1
        ahead, kept = list(run), 0
        while len(ahead) < window and ahead[-1] + 1 < self._block_count():
            if self._kept(ahead[-1] + 1):
                kept += 1
                if kept > 1:
                    break
            ahead.append(ahead[-1] + 1)
        while ahead[-1] not in run and self._kept(ahead[-1]):
            ahead.pop()  # a fetch never ends with a block kept already
        self._streams[ahead[-1] + 1] = max(window, len(ahead))
        while len(self._streams) > 8:
            self._streams.popitem(last=False)
        return ahead

    def _kept(self, index: int) -> bool:
        """Block `index` is at hand: in memory, or in the range cache (when there is one)."""
        return index in self._memory or (self.folder is not None and os.path.exists(self._block_path(index)))

    def _block_path(self, index: int) -> str:
        assert self.folder is not None
        return os.path.join(self.folder, "%08d" % index)

    def _from_disk(self, index: int) -> Optional[bytes]:
        if self.folder is None:
            return None
        try:
            with open(self._block_path(index), "rb") as fh:
                stored = fh.read()
        except OSError:
            return None
        block, crc = stored[:-4], stored[-4:]
        expected = min(BLOCK_SIZE, self.size - index * BLOCK_SIZE)
        if len(block) != expected or zlib.crc32(block).to_bytes(4, "little") != crc:
            return None  # torn or damaged: fetched again, and the new block replaces it
        return block

    def _to_disk(self, index: int, block: bytes) -> None:
        """Keep a fetched block: written whole to a temporary file, then renamed into place."""
        if self.folder is None:
            return
        try:
            if not self._folder_ready:
                os.makedirs(self.folder, exist_ok=True)
                about = os.path.join(self.folder, "about.json")
                if not os.path.exists(about):  # which golden this is, for whoever looks in the cache
                    _write_atomically(about, json.dumps({"url": self.url, "size": self.size,
                                                         "validators": self.validators}).encode())
                self._folder_ready = True
            _write_atomically(self._block_path(index), block + zlib.crc32(block).to_bytes(4, "little"))
        except OSError:  # a read-only or full disk: go on without keeping blocks
            self.folder = None

    def _fetch(self, start: int, end: int) -> bytes:
        """Bytes start..end from the server, in one ranged request."""
        try:
            handle = self._opened()
            handle.seek(start)
            data = handle.read(end - start)
        except Exception as exc:  # noqa: BLE001  # every transport raises its own: reworded by _failure
            self.failure = _failure(self.url, exc, "fetching bytes %d-%d" % (start, end - 1))
            raise self.failure from None
        if len(data) != end - start:
            self.failure = RemoteError("%s: the server sent %d of bytes %d-%d: the file is shorter than it said "
                                       "(replaced while being read?); open it again"
                                       % (self.url, len(data), start, end - 1))
            raise self.failure
        self.fetched.add(len(data))
        fetched.add(len(data))
        return data

    def _opened(self) -> Any:
        if self._pid != os.getpid():  # forked: this process makes its own connections
            self._fs, self._path = _filesystem(self.url)
            self._handle, self._pid = None, os.getpid()
        if self._handle is None:
            # No fsspec read-ahead or cache: every read is one request for exactly the bytes asked.
            self._handle = self._fs.open(self._path, "rb", cache_type="none", size=self.size)
        return self._handle


def identity(url: str, head: bytes, size: int, validators: Dict[str, str]) -> str:
    """The range cache's key for a golden: its first bytes (the user block's recording token),
    size and validators; a file without tracekit's user block is also known by its URL."""
    parts = [head.hex(), str(size)] + ["%s=%s" % kv for kv in sorted(validators.items())]
    if not head.startswith(USERBLOCK_MAGIC):
        parts.append(url)
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:40]


def _runs(indices: List[int]) -> List[List[int]]:
    """[3, 4, 5, 9] -> [[3, 4, 5], [9]]."""
    runs: List[List[int]] = []
    for index in indices:
        if runs and runs[-1][-1] == index - 1:
            runs[-1].append(index)
        else:
            runs.append([index])
    return runs


def _write_atomically(path: str, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise


def clear_cache() -> None:
    """Remove every kept block (they are fetched again when needed)."""
    import shutil

    shutil.rmtree(os.path.join(cache_dir(), RANGES), ignore_errors=True)
