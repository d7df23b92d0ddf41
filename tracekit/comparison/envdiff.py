"""What differs between the environments of two traces, and which differences decide
the kernels that ran (and so the last bits of every result).

Bit-for-bit agreement is a fact only between two runs whose kernel-selecting fields all
match: the same TensorFlow, processor (model, instruction sets, and the cache sizes that
Eigen's blocking reads), oneDNN setting, thread count, XLA, determinism, TF32, devices
and the environment variables that change them. A field a trace did not record (goldens
from before tracekit recorded it) is None and counts as differing: nothing proves it the
same. A field recorded as unknowable on that machine (no /sys cache information) is
UNAVAILABLE, a value like any other.

Values are data (strings, numbers, tuples); report/environment.py renders them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Tuple

from .profiles import profile
from .tolerance import Tolerance

Meta = Mapping[str, Any]
UNAVAILABLE = "unavailable"  # recorded, but the machine could not tell
NOT_APPLICABLE = "n/a"  # a GPU setting on a run without a GPU
# Environment variables that change results and that no other field covers.
NUMERICS_VARIABLES = ("TF_XLA_FLAGS", "TF_DETERMINISTIC_OPS", "TF_CUDNN_DETERMINISTIC", "ONEDNN_DEFAULT_FPMATH_MODE",
                      "NVIDIA_TF32_OVERRIDE", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "TF_NUM_INTRAOP_THREADS",
                      "TF_ENABLE_AUTO_MIXED_PRECISION")


def _section(meta: Meta, name: str) -> Dict[str, Any]:
    value = meta.get(name)
    return value if isinstance(value, dict) else {}


def _env(meta: Meta) -> Dict[str, Any]:
    return _section(meta, "environment")


def _tf(meta: Meta) -> Dict[str, Any]:
    return _section(meta, "tensorflow")


def _recorded(section: Dict[str, Any], key: str) -> Any:
    """None: the trace did not record `key`; UNAVAILABLE: it recorded that it could not tell."""
    if key not in section:
        return None
    value = section[key]
    return UNAVAILABLE if value is None else value


def _tf_version(meta: Meta) -> Any:
    # Only what the recorder or replayer wrote: environment["tensorflow"] is merely the
    # version a process had loaded when it wrote a trace through the store alone.
    return _tf(meta).get("version")


def _keras(meta: Meta) -> Any:
    """The Keras a trace computed with: a replay's port's model's (tensorflow.keras, known as the
    replay starts), TF 1.x's own tf.keras for a recording on it; None where the trace does not
    say (the Keras installed is not the one a program used: TF 2 may have two)."""
    version = str(_tf_version(meta) or "")
    if version.startswith("1."):
        return "TF %s's tf.keras" % version
    return _tf(meta).get("keras")


def _isa(meta: Meta) -> Any:
    isa = _recorded(_env(meta), "cpu_isa")
    return tuple(isa) if isinstance(isa, list) else isa


def _cpu_model(meta: Meta) -> Any:
    """Vendor, family and model number: kernels may choose by microarchitecture, and a VM
    may name every processor alike ("AMD EPYC")."""
    env = _env(meta)
    if "cpu_vendor" not in env:
        return None
    return tuple(str(env.get(k)) for k in ("cpu_vendor", "cpu_family", "cpu_model"))


def _caches(meta: Meta) -> Any:
    caches = _recorded(_env(meta), "cpu_caches")
    return tuple(sorted(caches.items())) if isinstance(caches, dict) else caches


def _variables(meta: Meta) -> Any:
    env = _env(meta).get("env")
    if not isinstance(env, dict):
        return None
    return tuple((k, env[k]) for k in NUMERICS_VARIABLES if k in env)


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
    return tuple((g.get("name"), g.get("compute_capability")) for g in gpus if isinstance(g, dict))


def _gpu_setting(read: Callable[[Dict[str, Any]], Any]) -> Callable[[Meta], Any]:
    """A setting that matters only on a GPU (TF32, CUDA/cuDNN): NOT_APPLICABLE without one."""
    def get(meta: Meta) -> Any:
        tf = _tf(meta)
        if "gpus" not in tf:
            return None
        return read(tf) if tf["gpus"] else NOT_APPLICABLE
    return get


def _grappler(meta: Meta) -> Any:
    """The Grappler passes a run switched on or off ("default": none): TF 2's options as set,
    TF 1's from its session's rewrite_options."""
    tf = _tf(meta)
    if isinstance(tf.get("grappler"), dict):
        # TF reports its two disable_* switches once any option is set: off is their default
        options = {k: v for k, v in tf["grappler"].items() if not (k.startswith("disable_") and v is False)}
        return ", ".join("%s=%s" % (k, "on" if v is True else "off" if v is False else v)
                         for k, v in sorted(options.items())) or "default"
    config = tf.get("session_config")
    if isinstance(config, dict) and isinstance(config.get("graph_options"), str):
        found = re.findall(r"(\w+): (ON|OFF|AGGRESSIVE)\b", config["graph_options"])
        return ", ".join("%s=%s" % (k, v.lower()) for k, v in sorted(found)) or "default"
    return None


def _tf_field(name: str) -> Callable[[Meta], Any]:
    return lambda meta: _tf(meta).get(name)


def _env_field(name: str) -> Callable[[Meta], Any]:
    return lambda meta: _env(meta).get(name)


# (label, reader, selects kernels). The order is the order of the report.
FIELDS: List[Tuple[str, Callable[[Meta], Any], bool]] = [
    ("tensorflow", _tf_version, True),
    ("architecture", _env_field("machine"), True),
    ("cpu model", _cpu_model, True),
    ("cpu instruction sets", _isa, True),
    ("cpu caches", _caches, True),
    ("oneDNN", _onednn("enabled"), True),
    ("oneDNN ISA cap", _onednn("max_cpu_isa"), True),
    ("intra-op threads", _threads, True),
    ("XLA JIT", _tf_field("xla_jit"), True),
    ("op determinism", _tf_field("determinism"), True),
    ("Grappler options", _grappler, True),
    ("TF32", _gpu_setting(lambda tf: tf.get("tf32")), True),  # an Ampere+ GPU matmul mode
    ("devices", _devices, True),
    ("GPUs", _gpus, True),
    ("CUDA, cuDNN", _gpu_setting(lambda tf: (tf.get("cuda"), tf.get("cudnn"))), True),
    ("numerics variables", _variables, True),
    ("Keras dtype policy", _tf_field("dtype_policy"), False),  # mixed precision: the port's own computation
    ("cpu", _env_field("cpu"), False),
    ("python", _env_field("python"), False),
    ("keras", _keras, False),
    ("numpy", _env_field("numpy"), False),
]
FRAMEWORK = "tensorflow"
RECORDED_LATER = frozenset(["Grappler options"])  # absent from traces recorded before it was: say nothing
# A port replayed in another framework (the trace's section of it -> its name): TensorFlow's own
# fields say nothing of it, and its kernels are its framework's (PORT_FIELDS reads what it tells).
PORT_FRAMEWORKS = (("torch", "PyTorch"), ("jax", "JAX"))
TF_ONLY = frozenset(["tensorflow", "oneDNN", "oneDNN ISA cap", "intra-op threads", "XLA JIT", "op determinism",
                     "Grappler options", "TF32", "devices", "GPUs", "CUDA, cuDNN", "Keras dtype policy", "keras"])
# field -> what a port framework's section holds of it (its own name for it)
PORT_FIELDS = {"oneDNN": {"torch": "mkldnn"}, "intra-op threads": {"torch": "threads"},
               "op determinism": {"torch": "deterministic"}, "XLA flags": {"jax": "xla_flags"},
               "matmul precision": {"jax": "matmul_precision"}}


def port_framework(meta: Meta) -> Any:
    """"PyTorch 2.13.0", "JAX 0.10.2": the framework a port's replay ran in, where not TensorFlow
    (None: a TensorFlow trace)."""
    for key, name in PORT_FRAMEWORKS:
        section = _section(meta, key)
        if section:
            return "%s %s" % (name, section.get("version"))
    return None


def _port_numerics(meta: Meta) -> Dict[str, Any]:
    """The fields a port framework's section tells (PORT_FIELDS), by their labels."""
    out = {}
    for label, names in PORT_FIELDS.items():
        for key, name in names.items():
            section = _section(meta, key)
            if section and name in section:
                out[label] = section[name]
    return out


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
    """The fields of one trace's metadata the diff compares (None: not recorded). A port's replay
    in another framework: its "framework", and what that framework's section tells in place of
    TensorFlow's fields."""
    out = {label: read(meta) for label, read, _ in FIELDS}
    framework = port_framework(meta)
    if framework is not None:
        out = {label: value for label, value in out.items() if label not in TF_ONLY}
        out.update(_port_numerics(meta), framework=framework)
    return out


def environment_diff(golden_meta: Meta, actual_meta: Meta) -> EnvironmentDiff:
    golden, actual = numerics(golden_meta), numerics(actual_meta)
    changes = []
    fields = [(label, kernels) for label, _, kernels in FIELDS]
    ported = "framework" in golden or "framework" in actual
    if ported:  # a port in another framework: its own fields
        fields = [("framework", True)] + [(label, True) for label in PORT_FIELDS] + \
                 [(label, kernels) for label, kernels in fields if label not in TF_ONLY]
        for side in (golden, actual):
            side.setdefault("framework", "TensorFlow %s" % side.get(FRAMEWORK) if side.get(FRAMEWORK) else None)
    for label, kernels in fields:
        g, a = golden.get(label), actual.get(label)
        if ported and label in PORT_FIELDS and (g is None or a is None):
            continue  # told by one framework's section only: nothing to set beside it
        if g == a and g is not None:
            continue
        if not kernels and (g is None or a is None):
            continue  # informational, and a side did not record it: nothing to say
        if g is None and a is None and label in RECORDED_LATER:
            continue  # traces of an older tracekit, on both sides: as before
        changes.append(Change(label, g, a, kernels))
    return EnvironmentDiff(golden, actual, tuple(changes))


@dataclass(frozen=True)
class Profile:
    """The tolerance a comparison used, and why."""

    name: str  # a profile's (profiles.py), or "given"
    tolerance: Tolerance
    reason: str


MIXED_POLICIES = ("mixed_float16", "mixed_bfloat16")


def default_profile(diff: EnvironmentDiff, other_code: bool, given: "Tolerance | str | None" = None) -> Profile:
    """The tolerance when the caller gives none (or names a profile). Other code (a port
    replayed against a recording) or another TensorFlow: "default", Tolerance() (the
    migration guide's float32 tolerance). The same code on the same TensorFlow: "exact",
    bit for bit, when nothing that selects kernels differs, else "round-off", the
    documented cross-machine bound (Tolerance.roundoff())."""
    if isinstance(given, str):
        return Profile(given, profile(given), "asked for")
    if given is not None:
        return Profile("given", given, "the tolerance passed to the comparison")
    golden, actual = diff.golden.get(FRAMEWORK), diff.actual.get(FRAMEWORK)
    if other_code:
        policy = diff.actual.get("Keras dtype policy")
        if policy in MIXED_POLICIES and diff.golden.get("Keras dtype policy") not in MIXED_POLICIES:
            return Profile("mixed-precision", Tolerance.mixed_precision(),
                           "a port under the Keras policy %s compared with a float32 golden: step 0 at float16 "
                           "precision, later steps the loss only (rtol=0.05)" % policy)
        if "GPU" in (diff.actual.get("devices") or ()) and "GPU" not in (diff.golden.get("devices") or ()):
            tf32 = diff.actual.get("TF32") is True
            return Profile("gpu", Tolerance.gpu(tf32), "a port on a GPU compared with a golden recorded without one: "
                           "the training tolerance, GPU round-off at step 0%s" % (", TensorFloat-32 matmuls" if tf32
                                                                                  else ""))
        if "framework" in diff.actual:
            return Profile("default", Tolerance(), "a port compared with its golden (%s vs %s): the default "
                           "tolerance" % (diff.golden.get("framework") or "TensorFlow " + _version(golden),
                                          diff.actual["framework"]))
        return Profile("default", Tolerance(), "a port compared with its golden (TensorFlow %s vs %s): "
                       "the default tolerance" % (_version(golden), _version(actual)))
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


def _version(version: Any) -> str:
    return "not recorded" if version is None else str(version)
