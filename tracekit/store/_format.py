"""Constants and names of the golden trace format (version 4; versions 1 to 3 are still read);
docs/FORMAT.md explains them.
The tensor vocabulary (kinds, "kind/name" keys, step labels) is tracekit.keys."""

from __future__ import annotations

import os
import re
import zlib

from ..keys import INITIAL_STEP, KIND_ORDER, STATE_KINDS

FORMAT_VERSION = 4
# Version 4 may keep a random draw as its generator's key and counter (drawn.py); version 3 added
# digests made by TensorFlow, with their round-off stated (digest.py).
# Version 2 keeps each step's info and index in blocks of steps (BLOCKS_GROUP), with every plain
# leaf's bytes inside and no dataset of its own; version 1 kept them as attributes of each step's
# group, beside a dataset for every leaf.
BLOCKS_VERSION = 2

# Root attributes of a finished golden.
ATTR_FORMAT = "tracekit_format"
ATTR_PRODUCER = "producer"
ATTR_CREATED = "created"
ATTR_STEPS = "steps"
ATTR_RECOVERED = "recovered"

# Per-dataset attributes.
ATTR_CRC = "crc32"
ATTR_LOGICAL = "logical_dtype"
ATTR_LOGICAL_SHAPE = "logical_shape"
ATTR_FORM = "form"
ATTR_DELTA_BASE = "delta_base"
ATTR_STRUCTURE = "structure"
ATTR_INFO = "info"
ATTR_INDEX = "index"  # per step: every value's descriptors, small leaves inline (docs/FORMAT.md)
# Beside a msgpack blob attribute (info, index) its crc32: a blob large enough for HDF5's dense
# attribute storage is not covered by HDF5's own metadata checksums.
BLOB_CRC_SUFFIX = "_crc32"

# A step's digests (store/digest.py) are one value of their own, after its tensors: a uint8 blob
# of msgpack, compressed as any array. Not a tensor kind: a step's mapping never lists it.
DIGESTS_KIND = "digests"
DIGESTS_NAME = "step"
STORED_ORDER = dict(KIND_ORDER, **{DIGESTS_KIND: len(KIND_ORDER)})  # what a step may store, in order

META_DATASET = "meta"
STEPS_GROUP = "steps"
INITIAL_GROUP = "initial"
BLOCKS_GROUP = "blocks"
ATTR_BLOCK_STEPS = "steps"  # a block's attribute: how many steps it holds

# A block of steps (format 2) ends after this many steps, or once its steps' indexes hold this many
# bytes: a replay reads one block where it read each step's attributes, and decodes at most this much
# to read one step.
BLOCK_STEPS = 64
BLOCK_BYTES = 4 << 20

HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
JOURNAL_MAGIC = b"\x89TKJ\r\n\x1a\n"
JOURNAL_SUFFIX = ".journal"
# A recording writes its golden beside the path and renames it there when finished: a golden
# already at the path stays whole until then, and is replaced in one step.
PARTIAL_SUFFIX = ".partial"

# A golden starts with a 512-byte HDF5 user block (HDF5 itself skips it) naming the
# recording: a journal applies to the file only if their tokens agree.
USERBLOCK_SIZE = 512
USERBLOCK_MAGIC = b"TRACEKIT golden\n"

# HDF5 filters declared on chunked datasets.
FILTER_SHUFFLE = 2
FILTER_ZSTD = 32015
MASK_SKIP_SHUFFLE = 1
MASK_SKIP_ZSTD = 2

# Chunks are at most this big: large enough for zstd, small enough to spread over threads.
CHUNK_BYTES = 4 << 20
# A delta-encoded variable gets a raw keyframe every this many snapshots, so reading
# one snapshot decodes at most this many. 4 rather than 8: a cold read of one tensor of
# a 1.2 GB golden takes ~23 ms instead of ~50, for a state ratio of 1.41 instead of
# 1.44 (tools/bench_store.py).
KEYFRAME_INTERVAL = 4


DELTA_KINDS = STATE_KINDS  # variables and slots may be stored as deltas to their previous snapshot


# HDF5 link names cannot hold "/" and "." alone means the group itself, so TF names
# ("dense/kernel:0") are percent-escaped into one link name; every name round-trips.
def escape_name(name: str) -> str:
    out = name.replace("%", "%25").replace("/", "%2F")
    if out.startswith("."):
        out = "%2E" + out[1:]
    return out


_UNESCAPE = {"%25": "%", "%2F": "/", "%2E": "."}


def unescape_name(link: str) -> str:
    return re.sub("%(?:25|2F|2E)", lambda m: _UNESCAPE[m.group(0)], link)


def step_path(step: int) -> str:
    """HDF5 path of a step's group; the initial state is step -1."""
    if step == INITIAL_STEP:
        return INITIAL_GROUP
    return "%s/%08d" % (STEPS_GROUP, step)


def block_path(first: int) -> str:
    """HDF5 path of the block of steps starting at step `first`."""
    return "%s/%08d" % (BLOCKS_GROUP, first)


def value_path(step: int, kind: str, name: str) -> str:
    return "%s/%s/%s" % (step_path(step), kind, escape_name(name))


def blob_crc(data: bytes) -> int:
    """The crc32 stored beside a metadata blob (/meta's `crc32`, a step's `info_crc32`, ...)."""
    return zlib.crc32(data) & 0xFFFFFFFF


def journal_path(path: str) -> str:
    return path + JOURNAL_SUFFIX


def userblock(token: str) -> bytes:
    text = USERBLOCK_MAGIC + ("format %d\ntoken %s\n" % (FORMAT_VERSION, token)).encode("ascii")
    return text.ljust(USERBLOCK_SIZE, b"\x00")


def userblock_token(path: str) -> "str | None":
    """The recording token in a golden's user block, or None if it has none."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(USERBLOCK_SIZE)
    except OSError:
        return None
    if not head.startswith(USERBLOCK_MAGIC):
        return None
    for line in head.split(b"\x00", 1)[0].decode("ascii", "replace").splitlines():
        if line.startswith("token "):
            return line[len("token "):].strip()
    return None


def identity(path: str) -> "tuple | None":
    """What is at `path` now, to tell later whether it was replaced meanwhile: its inode and
    recording token (None if there is nothing)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino, userblock_token(path)


def beside(path: str, token: str) -> str:
    """Where a recording that must not replace the golden at `path` is kept: g.h5 -> g.<token>.h5."""
    stem, ext = os.path.splitext(path)
    return "%s.%s%s" % (stem, token[:12], ext or ".h5")


def producer_string() -> str:
    import sys

    import h5py

    from .._version import __version__

    return "tracekit %s (Python %s, h5py %s, HDF5 %s)" % (
        __version__, sys.version.split()[0], h5py.version.version, h5py.version.hdf5_version)
