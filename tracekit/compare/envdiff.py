"""What differs between the environments of two traces, and which differences decide
the kernels that ran (and so the last bits of every result).

Bit-for-bit agreement is a fact only between two runs whose kernel-selecting fields
all match: the same TensorFlow, processor (model, instruction sets, cache sizes, which
Eigen's blocking reads), oneDNN setting, thread count, XLA, determinism, TF32 and devices. A field a trace did not record (goldens from
before tracekit recorded it) counts as differing: nothing proves it the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from .tolerance import Tolerance

Meta = Mapping[str, Any]


def _env(meta: Meta) -> Dict[str, Any]:
    env = meta.get("environment")
    return env if isinstance(env, dict) else {}


def _tf(meta: Meta) -> Dict[str, Any]:
    tf = meta.get("tensorflow")
    return tf if isinstance(tf, dict) else {}


def _tf_version(meta: Meta) -> Any:
    # Only what the recorder or replayer wrote: environment["tensorflow"] is merely the
    # version a process had loaded when it wrote a trace through the store alone.
    return _tf(meta).get("version")


def _isa(meta: Meta) -> Any:
    isa = _env(meta).get("cpu_isa")
    return None if isa is None else tuple(isa)


def _cpu(meta: Meta) -> Any:
    """The processor: model name, vendor, family and model number. Kernels may choose by
    microarchitecture, not only by instruction set; a generic name ("AMD EPYC" in a VM) is
    told apart by its family and model numbers."""
    env = _env(meta)
    if env.get("cpu") is None:
        return None
    ids = [str(env[k]) for k in ("cpu_vendor", "cpu_family", "cpu_model") if env.get(k) is not None]
    return env["cpu"] + (" (%s)" % " ".join(ids) if ids else "")


def _caches(meta: Meta) -> Any:
    caches = _env(meta).get("cpu_caches")
    return None if not isinstance(caches, dict) else " ".join("%s %s" % kv for kv in sorted(caches.items()))


def _onednn(field: str) -> Callable[[Meta], Any]:
    def get(meta: Meta) -> Any:
        onednn = _tf(meta).get("onednn")
        if not isinstance(onednn, dict):
            return None  # not recorded
        value = onednn.get(field)
        return "none" if value is None and field == "max_cpu_isa" else value
    return get


def _threads(meta: Meta) -> Any:
    threads = _tf(meta).get("threads")
    return threads.get("intra_op") if isinstance(threads, dict) else None


def _devices(meta: Meta) -> Any:
    devices = _tf(meta).get("devices")
    if not isinstance(devices, list):
        return None
    # XLA_CPU/XLA_GPU are TF 1's compilation pseudo-devices, listed whether used or not.
    return tuple(sorted({str(d.get("type")) for d in devices
                         if isinstance(d, dict) and not str(d.get("type")).startswith("XLA_")}))


def _gpus(meta: Meta) -> Any:
    gpus = _tf(meta).get("gpus")
    if not isinstance(gpus, list):
        return None
    return tuple("%s (%s)" % (g.get("name"), g.get("compute_capability")) for g in gpus if isinstance(g, dict))


def _cuda(meta: Meta) -> Any:
    tf = _tf(meta)
    if "cuda" not in tf:
        return None
    return "none" if not tf.get("gpus") else "%s / cuDNN %s" % (tf.get("cuda"), tf.get("cudnn"))


def _tf32(meta: Meta) -> Any:
    tf = _tf(meta)
    if "tf32" not in tf:
        return None
    return "n/a (no GPU)" if not tf.get("gpus") else tf["tf32"]  # TF32 is a GPU (Ampere+) matmul mode


def _tf_field(name: str) -> Callable[[Meta], Any]:
    return lambda meta: _tf(meta).get(name)


def _env_field(name: str) -> Callable[[Meta], Any]:
    return lambda meta: _env(meta).get(name)


# (label, reader, selects kernels). The order is the order of the report.
FIELDS = [
    ("tensorflow", _tf_version, True),
    ("architecture", _env_field("machine"), True),
    ("cpu", _cpu, True),
    ("cpu instruction sets", _isa, True),
    ("cpu caches", _caches, True),
    ("oneDNN", _onednn("enabled"), True),
    ("oneDNN ISA cap", _onednn("max_cpu_isa"), True),
    ("intra-op threads", _threads, True),
    ("XLA JIT", _tf_field("xla_jit"), True),
    ("op determinism", _tf_field("determinism"), True),
    ("TF32", _tf32, True),
    ("devices", _devices, True),
    ("GPUs", _gpus, True),
    ("CUDA", _cuda, True),
    ("python", _env_field("python"), False),
    ("keras", _env_field("keras"), False),
    ("numpy", _env_field("numpy"), False),
]  # type: List[Tuple[str, Callable[[Meta], Any], bool]]
FRAMEWORK = "tensorflow"


@dataclass(frozen=True)
class Change:
    """One field that differs. None on a side: that trace did not record it."""

    field: str
    golden: Any
    actual: Any
    kernels: bool  # decides which kernels run, and so the last bits

    @property
    def unknown(self) -> bool:
        return self.golden is None or self.actual is None


@dataclass(frozen=True)
class EnvironmentDiff:
    """The environments of a golden and an actual trace, side by side (field -> value)."""

    golden: Dict[str, Any]
    actual: Dict[str, Any]
    changes: Tuple[Change, ...]

    @property
    def kernel_changes(self) -> Tuple[Change, ...]:
        return tuple(c for c in self.changes if c.kernels)

    @property
    def machine_changes(self) -> Tuple[Change, ...]:
        """Kernel-selecting differences other than the framework's version: the machine
        and the settings of the run."""
        return tuple(c for c in self.kernel_changes if c.field != FRAMEWORK)

    @property
    def same_kernels(self) -> bool:
        """Everything that selects kernels is recorded on both sides and equal: the two
        runs can be expected to agree bit for bit."""
        return not self.kernel_changes

    @property
    def same_framework(self) -> bool:
        version = self.golden.get(FRAMEWORK)
        return version is not None and version == self.actual.get(FRAMEWORK)

    def to_dict(self) -> Dict[str, Any]:
        return {"golden": dict(self.golden), "actual": dict(self.actual),
                "changes": [{"field": c.field, "golden": c.golden, "actual": c.actual, "kernels": c.kernels}
                            for c in self.changes]}


def numerics(meta: Meta) -> Dict[str, Any]:
    """The fields of one trace's metadata the diff compares (None: not recorded)."""
    return {label: read(meta) for label, read, _ in FIELDS}


def environment_diff(golden_meta: Meta, actual_meta: Meta) -> EnvironmentDiff:
    golden, actual = numerics(golden_meta), numerics(actual_meta)
    changes = []
    for label, _, kernels in FIELDS:
        g, a = golden[label], actual[label]
        if g == a and g is not None:
            continue
        if not kernels and (g is None or a is None):
            continue  # informational, and a side did not record it: nothing to say
        changes.append(Change(label, g, a, kernels))
    return EnvironmentDiff(golden, actual, tuple(changes))


@dataclass(frozen=True)
class Profile:
    """The tolerance a comparison used, and why."""

    name: str  # "exact", "round-off", "default" or "given"
    tolerance: Tolerance
    reason: str


def default_profile(diff: EnvironmentDiff, port: bool, given: Optional[Tolerance] = None) -> Profile:
    """The tolerance when the caller gives none. A port (a replay compared with a recording:
    other code) or another TensorFlow: "default", Tolerance() (the migration guide's float32
    tolerance). The same code (two recordings, or two replays) on the same TensorFlow: "exact",
    bit for bit, when nothing that selects kernels differs, else "round-off", the documented
    cross-machine bound (Tolerance.roundoff())."""
    if given is not None:
        return Profile("given", given, "the tolerance passed to the comparison")
    golden, actual = diff.golden.get(FRAMEWORK), diff.actual.get(FRAMEWORK)
    if port:
        return Profile("default", Tolerance(), "a replay of a port against a recording (TensorFlow %s vs %s): "
                       "the default tolerance" % (_value(golden), _value(actual)))
    if golden is None or actual is None:
        return Profile("default", Tolerance(), "no TensorFlow recorded in %s: the default tolerance"
                       % ("either trace" if golden == actual else "the golden" if golden is None else "the actual"))
    if not diff.same_framework:
        return Profile("default", Tolerance(), "TensorFlow %s vs %s: the default tolerance" % (golden, actual))
    if diff.same_kernels:
        return Profile("exact", Tolerance.exact(), "the same code, and nothing that selects kernels differs: "
                       "bit for bit")
    known = [c.field for c in diff.kernel_changes if not c.unknown]
    unknown = len(diff.kernel_changes) - len(known)
    what = ", ".join(known + (["%d field%s not recorded" % (unknown, "s" if unknown > 1 else "")] if unknown else []))
    return Profile("round-off", Tolerance.roundoff(),
                   "the same code and TensorFlow, but other kernels (%s): the cross-machine round-off bound" % what)


def _value(version: Any) -> str:
    return "not recorded" if version is None else str(version)
