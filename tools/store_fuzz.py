"""Hostile files for tools/store_campaign.py: a valid small golden edited with h5py to declare
absurd things (HDF5 types tracekit never writes, 1e12-element shapes, 200k-field structures,
huge step indexes, steps = 1e9, format 999, hostile /meta, links that loop, random bytes, ...),
each from its case number and a seeded random generator alone. `make_bases` makes the goldens
they start from; `build_fuzz` makes case f<N>."""

from __future__ import annotations

import glob
import json
import os
import random
import shutil
import sys
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Tuple

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
GOLDENS_DIR = os.path.join(ROOT, "goldens")


def goldens_in(directory: str) -> List[str]:
    return sorted(glob.glob(os.path.join(directory, "*.h5")))


@dataclass
class Base:
    """A valid small golden that fuzz cases copy, and what is in it."""

    path: str
    indexed: bool = False  # its steps carry the `index` attribute (goldens of the earlier layout lack it)
    groups: List[str] = field(default_factory=list)  # "initial", "steps/00000000", ...
    leaves: List[str] = field(default_factory=list)  # leaf datasets
    structs: List[str] = field(default_factory=list)  # groups holding a structure
    blocks: List[str] = field(default_factory=list)  # format 2: the blocks of steps, "blocks/00000000", ...


def inventory(path: str) -> Base:
    import h5py

    base = Base(path)
    with h5py.File(path, "r") as f:
        base.groups = (["initial"] if "initial" in f else []) + ["steps/" + s for s in f.get("steps", {})]
        base.blocks = ["blocks/" + s for s in f.get("blocks", {})]
        base.indexed = any("index" in f[g].attrs for g in base.groups)
        for group in base.groups:
            def visit(name: str, obj: Any, group: str = group) -> None:
                if isinstance(obj, h5py.Dataset):
                    base.leaves.append("%s/%s" % (group, name))
                elif "structure" in obj.attrs:
                    base.structs.append("%s/%s" % (group, name))
            f[group].visititems(visit)
    return base


def build_indexed_base(source: str, dest: str) -> None:
    """The source's values rewritten by tracekit's writer (the current format, whatever the
    source's), plus a structure, strings and a chunked array in step 0 for the fuzzers to aim at."""
    import tracekit

    with tracekit.open(source) as src, tracekit.create(dest, meta={"user": {"by": "store_campaign"}}) as w:
        for step in ([src.initial] if src.has_initial else []) + list(src):
            with (w.initial(step.info) if step.index == -1 else w.step(step.info)):
                for key in step:
                    w.add(*key.split("/", 1), value=step[key])
                if step.index == 0:
                    w.add("fetch", "campaign/structure", {"a": np.arange(3.0), "b": (b"x", 1.5, None)})
                    w.add("fetch", "campaign/strings", np.array(["ab", "cde"]))
                    w.add("fetch", "campaign/big", np.arange(5000, dtype=np.float32))


def _pack(obj: Any) -> bytes:
    import msgpack

    return msgpack.packb(obj, use_bin_type=True)


def _msgpack_count(tag: int, count: int) -> bytes:
    return bytes([tag]) + count.to_bytes(4, "big")  # array32 0xdd, map32 0xdf, str32 0xdb, bin32 0xc6


def _set_blob(obj: Any, name: str, raw: bytes) -> None:
    """Write a msgpack blob attribute. Newer goldens keep a crc32 beside each (`index_crc32`,
    /meta's `crc32`): it is made to match, so the reader meets the hostile content itself."""
    obj.attrs[name] = np.void(raw)
    if name + "_crc32" in obj.attrs:
        obj.attrs[name + "_crc32"] = np.array(zlib.crc32(raw) & 0xFFFFFFFF, dtype="<u4")


def _step_of(path: str) -> str:
    return "initial" if path.startswith("initial") else "/".join(path.split("/")[:2])


def _unindex(f: Any, rng: random.Random, path: str) -> str:
    """Half the time drop the leaf's step index, so reads take the dataset's attributes."""
    group = f[_step_of(path)]
    if "index" in group.attrs and rng.random() < 0.5:
        for name in ("index", "index_crc32"):
            if name in group.attrs:
                del group.attrs[name]
        return "(no index)"
    return ""


def _swap(f: Any, rng: random.Random, path: str, **create: Any) -> Any:
    """Replace a leaf dataset by another, usually keeping its attributes (crc32, form, ...)."""
    attrs = dict(f[path].attrs)
    del f[path]
    ds = f.create_dataset(path, **create)
    if rng.random() < 0.8:
        for name, value in attrs.items():
            ds.attrs[name] = value
    return ds


def fz_dtype(f: Any, rng: random.Random, base: Base) -> str:
    """A leaf with an HDF5 type tracekit never writes."""
    import h5py

    path, n = rng.choice(base.leaves), rng.randint(1, 40)
    how = rng.choice(["vlen-str", "vlen-int", "ref", "compound", "array", "enum", "longdouble", "opaque"])
    dtype = {"vlen-str": h5py.string_dtype(), "vlen-int": h5py.vlen_dtype(np.int32), "ref": h5py.ref_dtype,
             "compound": np.dtype([("a", "<f4"), ("b", "<i8")]), "array": np.dtype("(3,)f4"),
             "enum": h5py.enum_dtype({"A": 0, "B": 1}, basetype="i1"), "longdouble": np.longdouble,
             "opaque": np.dtype("V7")}[how]
    ds = _swap(f, rng, path, shape=(n,), dtype=dtype, chunks=True if rng.random() < 0.5 else None)
    for i in range(n):
        ds[i] = {"vlen-str": "x" * rng.randrange(100), "vlen-int": np.arange(rng.randrange(5), dtype=np.int32),
                 "ref": f["meta"].ref}.get(how, ds[i])
    return "%s:%s%s" % (how, path, _unindex(f, rng, path))


def fz_huge(f: Any, rng: random.Random, base: Base) -> str:
    """A leaf whose shape claims ~1e12 elements, none of them written."""
    path = rng.choice(base.leaves)
    shape, chunks = rng.choice([((10 ** 12,), (1024,)), ((10 ** 6, 10 ** 6), (1, 1024)), ((2 ** 40,), (2 ** 20,)),
                                ((10 ** 12,), None), ((10 ** 9,), (1 << 20,))])  # 4 GB: over RLIMIT_AS
    _swap(f, rng, path, shape=shape, chunks=chunks, dtype="f4")
    return "%s%s:%s%s" % ("x".join(map(str, shape)), "" if chunks else "-contiguous", path, _unindex(f, rng, path))


LEAF_ATTRS: List[Tuple[str, Any]] = [
    ("logical_dtype", b"<U100000000"), ("logical_dtype", b"V1000000000"), ("logical_dtype", b"|O"),
    ("logical_dtype", b"object:str"), ("logical_dtype", b"(1000000000,)f8"), ("logical_dtype", b"S4294967296"),
    ("logical_dtype", b"<M8[as]"), ("logical_dtype", b"bfloat16"), ("logical_shape", [10 ** 12]),
    ("logical_shape", [2 ** 40, 2 ** 40]), ("logical_shape", [-1]), ("crc32", "text"), ("crc32", -1),
    ("crc32", [1, 2]), ("form", b"python"), ("form", b"scalar"), ("form", b"x" * 100000),
    ("delta_base", "SELF"), ("delta_base", b"/steps/99999999/var/x"), ("delta_base", b"/steps/abc/x"),
    ("delta_base", b"/initial/../../.."), ("delta_base", b"/steps/-0000001/var/x"), ("delta_base", b""),
]


def fz_leaf_attr(f: Any, rng: random.Random, base: Base) -> str:
    """A leaf's attributes declare absurd dtypes, shapes, checksums, forms or delta bases."""
    path = rng.choice(base.leaves)
    name, value = rng.choice(LEAF_ATTRS)
    if value == "SELF":
        value = ("/" + path).encode()
    f[path].attrs[name] = np.bytes_(value) if isinstance(value, bytes) else np.array(value) if isinstance(
        value, list) else value
    return "%s=%.40r:%s%s" % (name, value, path, _unindex(f, rng, path))


def fz_struct(f: Any, rng: random.Random, base: Base) -> str:
    """A leaf becomes a structure group whose description is huge, deep or malformed."""
    path = rng.choice(base.leaves)
    how = rng.choice(["namedtuple-200k", "list-200k", "deep-10000", "deep-70", "bad-names", "unhashable-key",
                      "not-a-list", "more-leaves"])
    f.move(path, path + ".leaf")  # the leaf, bit for bit, becomes the structure's only leaf
    group = f.create_group(path)
    f.move(path + ".leaf", path + "/0")
    raw = {
        "namedtuple-200k": lambda: _pack(["namedtuple", "T", ["f%d" % i for i in range(200000)],
                                          [["leaf"]] + [["none"]] * 199999]),
        "list-200k": lambda: _pack(["list", [["leaf"]] * 200000]),
        "deep-10000": lambda: b"\x92\xa4list\x91" * 10000 + _pack(["leaf"]),
        "deep-70": lambda: b"\x92\xa4list\x91" * 70 + _pack(["leaf"]),
        "bad-names": lambda: _pack(["namedtuple", "class", ["def", "1x"], [["leaf"], ["none"]]]),
        "unhashable-key": lambda: _pack(["dict", [[[1, 2], ["leaf"]]]]),
        "not-a-list": lambda: _pack({"leaf": 1}),
        "more-leaves": lambda: _pack(["tuple", [["leaf"], ["leaf"], ["leaf"]]]),
    }[how]()
    _set_blob(group, "structure", raw)
    step = f[_step_of(path)]
    for name in ("index", "index_crc32"):  # a hostile index is fz_index's: here reads take the group
        if name in step.attrs:
            del step.attrs[name]
    return "%s:%s" % (how, path)


INDEX_LEAVES: List[Dict[str, Any]] = [
    {"l": "chunked", "sh": [10 ** 12], "ch": [1]}, {"l": "chunked", "sh": [10 ** 12], "ch": [10 ** 12]},
    {"l": "chunked", "sh": [2 ** 31, 2 ** 31], "ch": [1, 1]}, {"l": "chunked", "sh": [2 ** 20], "ch": [2 ** 20]},
    {"l": "plain", "sh": [10 ** 9], "dt": "<f8", "n": 8 * 10 ** 9}, {"l": "plain", "sh": [10 ** 9], "n": 4},
    {"dt": "<U100000000"}, {"dt": "V1000000000"}, {"dt": "|O"}, {"dt": "S0"}, {"dt": 5}, {"dt": "(1000000000,)f8"},
    {"lg": "<U100000000"}, {"lg": "object:str", "ls": [10 ** 12]}, {"ls": [10 ** 12]}, {"ls": [2 ** 62, 4]},
    {"sh": [-1]}, {"sh": [2 ** 64 - 1]}, {"sh": "abc"}, {"sh": [1] * 100}, {"ch": [0]}, {"ch": [2 ** 62]},
    {"e": "xor", "b": 10 ** 9}, {"e": "xor", "b": -2}, {"e": "xor", "b": "SELF"}, {"e": "lzma"},
    {"crc": -1}, {"crc": 2 ** 64 - 1}, {"crc": "x"}, {"f": "python"}, {"f": "scalar"}, {"f": 5},
    {"v": b""}, {"v": "text"}, {"n": -1}, {"l": "weird"}, {"lv": 10 ** 9},
]


def fz_index(f: Any, rng: random.Random, base: Base) -> str:
    """A step's index declares huge shapes or chunks, 1e9 leaves, odd dtypes, or is not msgpack."""
    import msgpack

    group = rng.choice([g for g in base.groups if "index" in f[g].attrs])
    entries = msgpack.unpackb(f[group].attrs["index"].tobytes(), raw=False, strict_map_key=False)
    how = rng.choice(["leaf"] * 6 + ["1e9-leaves", "200k-leaves", "deep", "junk", "not-a-list", "unknown-kind",
                                     "str-1e9", "duplicates"])
    entry = rng.choice(entries)
    if how == "leaf":
        edit = dict(rng.choice(INDEX_LEAVES))
        if edit.get("b") == "SELF":
            edit["b"] = -1 if group == "initial" else int(group.split("/")[1])
        entry[3][rng.randrange(len(entry[3]))].update(edit)
        how = "leaf%s" % json.dumps(edit, default=repr)[:60]
        raw = _pack(entries)
    elif how == "1e9-leaves":
        raw = b"\x91\x94" + _pack(entry[0]) + _pack(entry[1]) + _pack(["list", []]) + _msgpack_count(0xdd, 10 ** 9) \
            + _pack(entry[3][0]) * 3
    elif how == "200k-leaves":
        entry[2], entry[3] = ["list", [["leaf"]] * 200000], [entry[3][0]] * 200000
        raw = _pack(entries)
    elif how == "str-1e9":
        raw = b"\x91\x94" + _msgpack_count(0xdb, 10 ** 9) + b"var"
    else:
        if how == "unknown-kind":
            entry[0] = "weights"
        raw = {"deep": b"\x91" * 10000 + b"\xc0", "junk": rng.randbytes(rng.randint(1, 200)),
               "not-a-list": _pack({"a": 1}), "duplicates": _pack(entries * 500)}.get(how) or _pack(entries)
    _set_blob(f[group], "index", raw)
    return "%s:%s" % (how, group)


def fz_block(f: Any, rng: random.Random, base: Base) -> str:
    """A block of steps (format 2) that lists other steps or a hostile step index or info, is not
    msgpack, or declares what it does not hold; its checksum made to match."""
    path = rng.choice(base.blocks)
    from tools.format1 import block_entries

    entries, held = block_entries(f, int(path.split("/")[1]))[1], int(f[path].attrs["steps"])
    how = rng.choice(["index"] * 4 + ["info", "shifted", "dropped", "twice", "held", "junk", "1e9-entries", "deep",
                                      "not-bytes", "1e12-declared"])
    entry = rng.choice(entries)
    if how == "index":
        index = msgpack_unpack(entry[2])
        edit = dict(rng.choice(INDEX_LEAVES))
        if edit.get("b") == "SELF":
            edit["b"] = entry[0]
        target = rng.choice([e for e in index if e[3]] or index)
        if target[3]:
            target[3][rng.randrange(len(target[3]))].update(edit)
        entry[2] = _pack(index)
        how = "index%s" % json.dumps(edit, default=repr)[:60]
    elif how == "info":
        entry[1] = rng.choice([b"\xc1", b"\x91" * 10000 + b"\xc0", _pack([1, 2]), _msgpack_count(0xdf, 10 ** 9)])
    elif how == "shifted":
        entry[0] += rng.choice([-1, 1, 10 ** 9])
    elif how == "dropped" and len(entries) > 1:
        entries.remove(entry)
    elif how == "twice":
        entries.append(entry)
    elif how == "held":
        held = rng.choice([0, -1, held + 1, 10 ** 9])
    elif how == "not-bytes":
        entry[rng.choice([1, 2])] = rng.choice(["text", 5, None, {"a": 1}])
    raw = {"junk": lambda: rng.randbytes(rng.randint(1, 200)), "deep": lambda: b"\x91" * 10000 + b"\xc0",
           "1e9-entries": lambda: _msgpack_count(0xdd, 10 ** 9) + _pack(entry) * 3}.get(how, lambda: _pack(entries))()
    del f[path]
    if how == "1e12-declared":
        ds = f.create_dataset(path, shape=(10 ** 12,), chunks=(1 << 20,), dtype="u1")
    else:
        ds = f.create_dataset(path, data=np.frombuffer(raw, dtype=np.uint8))
    ds.attrs["crc32"] = np.array(zlib.crc32(raw) & 0xFFFFFFFF, dtype="<u4")
    ds.attrs["steps"] = held
    return "%s:%s" % (how, path)


def msgpack_unpack(raw: bytes) -> Any:
    import msgpack

    return msgpack.unpackb(raw, raw=False, strict_map_key=False)


def fz_root(f: Any, rng: random.Random, base: Base) -> str:
    """Root attributes that say absurd things: 1e9 steps, format 999, megabyte strings."""
    name, value = rng.choice([
        ("steps", 10 ** 9), ("steps", -1), ("steps", 2 ** 63 - 1), ("steps", "many"), ("steps", np.arange(3)),
        ("steps", 1.5), ("tracekit_format", 999), ("tracekit_format", 2 ** 62), ("tracekit_format", -1),
        ("tracekit_format", np.arange(2)), ("tracekit_format", "1"), ("tracekit_format", 1.9),
        ("recovered", "yes"), ("producer", np.bytes_(b"p" * 1000000)), ("created", "text"),
        ("created", np.arange(200000))])
    f.attrs[name] = value
    return "%s=%.40r" % (name, value)


def fz_meta(f: Any, rng: random.Random, base: Base) -> str:
    """/meta replaced: deep nesting, 1e9-length headers, empty, huge, not bytes, not a map."""
    import h5py
    import msgpack

    how = rng.choice(["deep-10000", "str-1e9", "map-1e9", "empty", "scalar", "group", "fill-256MiB", "1e12",
                      "float", "2-D", "vlen", "not-a-map", "bad-catalog", "catalog-200k", "ext", "keys-200k"])
    old, sealed = f["meta"][()], "crc32" in f["meta"].attrs
    del f["meta"]
    data = {
        "deep-10000": lambda: b"\x91" * 10000 + b"\xc0",
        "str-1e9": lambda: _msgpack_count(0xdb, 10 ** 9) + b"abc",
        "map-1e9": lambda: _msgpack_count(0xdf, 10 ** 9) + _pack("catalog") + _pack([]),
        "not-a-map": lambda: _pack([1, 2]),
        "bad-catalog": lambda: _pack({"catalog": rng.choice(["abc", [{"kind": "var"}], [{
            "kind": "var", "name": "x", "shape": [10 ** 12], "dtype": "<U100000000", "steps": 10 ** 12}]])}),
        "catalog-200k": lambda: _pack({"catalog": [{"kind": "loss", "name": "l%d" % i, "shape": [],
                                                    "dtype": "float32", "steps": 1} for i in range(200000)]}),
        "ext": lambda: msgpack.packb({"catalog": [], "user": msgpack.ExtType(1, b"x")}),
        "keys-200k": lambda: _pack({"k%d" % i: i for i in range(200000)}),
    }
    if how in data:
        raw = data[how]()
        ds = f.create_dataset("meta", data=np.frombuffer(raw, np.uint8))
        if sealed:
            ds.attrs["crc32"] = np.array(zlib.crc32(raw) & 0xFFFFFFFF, dtype="<u4")
    elif how == "group":
        f.create_group("meta")
    else:
        shape, dtype, chunks = {"empty": ((0,), "u1", None), "scalar": ((), "u1", None),
                                "fill-256MiB": ((256 << 20,), "u1", (1 << 20,)),
                                "1e12": ((10 ** 12,), "u1", (1 << 20,)),
                                "float": ((100,), "f8", None), "2-D": ((2, old.size // 2), "u1", None),
                                "vlen": ((1,), h5py.string_dtype(), None)}[how]
        ds = f.create_dataset("meta", shape=shape, dtype=dtype, chunks=chunks)
        if how == "2-D":
            ds[...] = old[:old.size // 2 * 2].reshape(2, -1)
    return how


def fz_links(f: Any, rng: random.Random, base: Base) -> str:
    """Groups and links that loop, dangle, leave the file, or are not what the layout says."""
    import h5py

    steps = [g for g in base.groups if g.startswith("steps/")]
    step, n = rng.choice(steps), len(steps)
    how = rng.choice(["soft-loop", "soft-dangling", "external-self", "external-devzero", "hard-cycle",
                      "steps-dataset", "step-dataset", "kind-dataset", "step-gap", "extra-step", "odd-step-name",
                      "unknown-kind", "leaf-empty-group", "leaf-soft-loop"])
    leaf = rng.choice([p for p in base.leaves if p.startswith(step + "/")] or base.leaves)
    kind = "/".join(leaf.split("/")[:3])
    if how in ("soft-loop", "soft-dangling", "external-self", "external-devzero", "step-dataset"):
        del f[step]
        f[step] = {"soft-loop": lambda: h5py.SoftLink("/" + step), "soft-dangling": lambda: h5py.SoftLink("/nowhere"),
                   "external-self": lambda: h5py.ExternalLink(os.path.basename(f.filename), "/" + step),
                   "external-devzero": lambda: h5py.ExternalLink("/dev/zero", "/"),
                   "step-dataset": lambda: np.arange(3)}[how]()
    elif how == "hard-cycle":
        f[kind + "/loop"] = f[step]
    elif how == "steps-dataset":
        del f["steps"]
        f["steps"] = np.arange(n)  # as many items as the root attribute says steps
    elif how == "kind-dataset":
        del f[kind]
        f[kind] = np.arange(3)
    elif how in ("step-gap", "odd-step-name"):
        f.move(step, "steps/%08d" % (n + 5) if how == "step-gap" else "steps/abc")
    elif how == "extra-step":
        f.create_group("steps/%08d" % n)
        f.attrs["steps"] = n + 1
    elif how == "unknown-kind":
        f.move(kind, step + "/weights")
    else:
        del f[leaf]
        if how == "leaf-empty-group":
            f.create_group(leaf)
        else:
            f[leaf] = h5py.SoftLink("/" + leaf)
    return "%s:%s" % (how, step)


def _hostile(rng: random.Random) -> Any:
    import h5py

    return rng.choice([
        lambda: np.int64(10 ** 12), lambda: np.int64(-1), lambda: np.uint64(2 ** 64 - 1), lambda: np.float64("nan"),
        lambda: np.bytes_(b"x" * rng.randrange(1, 70000)), lambda: "text", lambda: h5py.Empty("f8"),
        lambda: np.void(rng.randbytes(rng.randint(1, 64))), lambda: np.bool_(True),
        lambda: np.void(_pack(rng.choice([[10 ** 12], {"sh": [10 ** 12]}, ["namedtuple", "T", ["a"], []], "leaf"]))),
        lambda: np.arange(rng.choice([1, 3, 200000])), lambda: np.array([10 ** 12] * 3)])()


def fz_mutate(f: Any, rng: random.Random, base: Base) -> str:
    """1-3 random attribute edits or deletions anywhere a reader looks."""
    done = []
    for _ in range(rng.randint(1, 3)):
        target = rng.choice([""] * 3 + base.groups + base.leaves + base.structs + ["meta"])
        if target and target not in f:
            continue
        attrs = (f[target] if target else f).attrs
        name = rng.choice(list(attrs) + ["index", "info", "structure", "crc32", "logical_dtype", "form", "steps"])
        if name in attrs and rng.random() < 0.25:
            del attrs[name]
            done.append("del %s@/%s" % (name, target))
        else:
            value = _hostile(rng)
            attrs[name] = value
            if isinstance(value, np.void) and rng.random() < 0.5:
                _set_blob(f[target] if target else f, name, value.tobytes())
            done.append("%s@/%s=%.30r" % (name, target, value))
    return ";".join(done)


def fz_bytes(path: str, rng: random.Random, base: Base) -> str:
    """Whole files: empty, random bytes with and without the HDF5 signature, a golden's head."""
    how = rng.choice(["empty", "random", "hdf5-signature", "hdf5-signature@512", "userblock+random",
                      "head+random", "middle-random"])
    with open(base.path, "rb") as fh:
        golden = fh.read()
    n = rng.randrange(1, 65536)
    sig = b"\x89HDF\r\n\x1a\n"
    data = {"empty": lambda: b"", "random": lambda: rng.randbytes(n), "hdf5-signature": lambda: sig + rng.randbytes(n),
            "hdf5-signature@512": lambda: rng.randbytes(512) + sig + rng.randbytes(n),
            "userblock+random": lambda: golden[:512] + rng.randbytes(n),
            "head+random": lambda: golden[:rng.randrange(512, 8192)] + rng.randbytes(n),
            "middle-random": lambda: golden[:len(golden) // 3] + rng.randbytes(len(golden) // 3)
            + golden[2 * len(golden) // 3:]}[how]()
    with open(path, "wb") as fh:
        fh.write(data)
    return "%s(%d bytes)" % (how, len(data))


# name: (builder, weight, needs the indexed base, writes the whole file)
FUZZERS: Dict[str, Tuple[Callable[..., str], int, bool, bool]] = {
    "dtype": (fz_dtype, 3, False, False), "huge": (fz_huge, 2, False, False),
    "leaf-attr": (fz_leaf_attr, 3, False, False), "struct": (fz_struct, 2, False, False),
    "index": (fz_index, 4, True, False), "root": (fz_root, 2, False, False), "meta": (fz_meta, 3, False, False),
    "links": (fz_links, 3, False, False), "mutate": (fz_mutate, 5, False, False), "bytes": (fz_bytes, 2, False, True),
    "block": (fz_block, 4, True, False),
}


# Case f<N> takes builder FUZZ_CYCLE[N % len]: every builder by f9, then each as often as its weight.
FUZZ_CYCLE = [n for w in range(max(f[1] for f in FUZZERS.values())) for n, f in FUZZERS.items() if f[1] > w]


def build_fuzz(path: str, number: int, rng: random.Random, bases: Dict[str, Base]) -> Tuple[str, str]:
    """Write hostile file number `number`; returns (label, the base golden's path)."""
    import h5py

    cycle = [n for n in FUZZ_CYCLE if "indexed" in bases or not FUZZERS[n][2]]
    name = cycle[number % len(cycle)]
    build, _, needs_index, whole = FUZZERS[name]
    base = bases["indexed"] if needs_index or ("indexed" in bases and rng.random() < 0.5) else bases["golden"]
    shutil.copyfile(base.path, path)
    try:
        if whole:
            detail = build(path, rng, base)
        else:
            with h5py.File(path, "r+") as f:
                detail = build(f, rng, base)
    except Exception as exc:  # noqa: BLE001  # h5py refused an edit: the case is skipped, and says why
        raise RuntimeError("%s: %s: %s" % (name, type(exc).__name__, exc)) from None
    return "%s/%s%s" % (name, detail, "" if whole else " [%s base]" % ("indexed" if base is bases.get("indexed") else "golden")), \
        base.path


def make_bases(workdir: str, goldens: List[str]) -> Dict[str, Base]:
    """"golden": the smallest of `goldens` as it is; "indexed": it rewritten with extras."""
    smallest = min(goldens, key=os.path.getsize)
    bases = {"golden": inventory(smallest)}
    indexed = os.path.join(workdir, "indexed-base.h5")
    try:
        build_indexed_base(smallest, indexed)
        bases["indexed"] = inventory(indexed)
    except Exception as exc:  # noqa: BLE001  # the writer is not what is tested here: go on without
        print("store_campaign: no indexed base (%s: %s); index fuzzers are off" % (type(exc).__name__, exc),
              file=sys.stderr)
    return bases
