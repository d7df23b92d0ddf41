"""The environment fingerprint every trace carries: where its numbers came from, in no
framework's terms.

- `fingerprint()` -> meta["environment"]: Python and library versions, the CPU (vendor,
  model and the instruction sets that make kernels pick their code path), the cores
  this process may use, and the environment variables that change numerics;
- `program_identity(entry, sources)` -> meta["program"]: the code a trace came from.

What only a running framework can tell (meta["tensorflow"]) is its adapter's:
tf_environment.py. This module imports no framework. Python 3.7 syntax.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import os
import platform
import sys
from typing import Any, Dict, Mapping, Optional, Sequence

from ._version import __version__

# Variables that change numerics or determinism (oneDNN reads ONEDNN_*, older builds DNNL_/MKLDNN_).
ENV_PREFIXES = ("TF_", "CUDA_", "XLA_", "OMP_", "MKL_", "KMP_", "NVIDIA_TF32", "ONEDNN_", "DNNL_", "MKLDNN_")
ENV_EXTRA = ("PYTHONHASHSEED",)
# Never recorded: Terraform shares the TF_ prefix (TF_VAR_* often holds secrets), and
# nothing that looks like a credential belongs in a golden that gets committed.
ENV_EXCLUDED_PREFIXES = ("TF_VAR_", "TF_CLI_", "TF_TOKEN_", "TF_LOG", "TF_REGISTRY_", "TF_PLUGIN_",
                         "TF_WORKSPACE", "TF_DATA_DIR", "TF_INPUT", "TF_IN_AUTOMATION", "TF_IGNORE",
                         "TF_STATE_", "TF_APPEND_USER_AGENT")
ENV_SECRET_WORDS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "API_KEY", "ACCESS_KEY", "PRIVATE")

# CPU flags (as Linux names them in /proc/cpuinfo) that decide which code path a kernel
# takes: Eigen, MKL-DNN/oneDNN and XLA dispatch on vector width, FMA and the AI extensions.
ISA_FLAGS = frozenset([
    # x86-64
    "sse4_1", "sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512dq", "avx512cd", "avx512bw",
    "avx512vl", "avx512ifma", "avx512vbmi", "avx512_vnni", "avx512_bf16", "avx512_fp16", "avx_vnni",
    "amx_tile", "amx_int8", "amx_bf16", "amx_fp16",
    # aarch64
    "asimd", "asimdhp", "asimddp", "fphp", "sve", "sve2", "bf16", "i8mm",
])


def recorded_env(environ: "Dict[str, str]") -> Dict[str, str]:
    """The environment variables a trace keeps."""
    return {k: v for k, v in sorted(environ.items())
            if (k.startswith(ENV_PREFIXES) or k in ENV_EXTRA) and not k.startswith(ENV_EXCLUDED_PREFIXES)
            and not any(word in k.upper() for word in ENV_SECRET_WORDS)}


def parse_cpuinfo(text: str) -> Dict[str, Any]:
    """Vendor, model and kernel-selecting instruction sets from /proc/cpuinfo's text
    (the first processor's block: all cores of one machine report the same)."""
    fields: Dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if fields:
                break
            continue
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    flags = (fields.get("flags") or fields.get("Features") or "").split()
    return {
        "vendor": fields.get("vendor_id") or fields.get("CPU implementer"),
        "model": fields.get("model name") or fields.get("Model name") or fields.get("CPU part"),
        "family": fields.get("cpu family") or fields.get("CPU architecture"),
        "model_number": fields.get("model") or fields.get("CPU variant"),
        "isa": sorted(ISA_FLAGS.intersection(flags)) if flags else None,
    }


def cpu_caches(root: str = "/sys/devices/system/cpu/cpu0/cache") -> Optional[Dict[str, str]]:
    """Cache sizes by level ("L1d": "32K", ...): Eigen sizes its matrix-product blocks
    from them, so they decide the order of the sums too."""
    try:
        entries = sorted(os.listdir(root))
    except OSError:
        return None
    out = {}
    for entry in entries:
        if not entry.startswith("index"):
            continue
        try:
            with open(os.path.join(root, entry, "level")) as fh:
                level = fh.read().strip()
            with open(os.path.join(root, entry, "type")) as fh:
                kind = fh.read().strip()
            with open(os.path.join(root, entry, "size")) as fh:
                size = fh.read().strip()
        except OSError:
            continue
        suffix = {"Data": "d", "Instruction": "i"}.get(kind, "")
        out["L%s%s" % (level, suffix)] = size
    return out or None


@functools.lru_cache(maxsize=None)
def cpu_info() -> Dict[str, Any]:
    """The CPU as kernels see it; None for what this platform does not tell. Read once per
    process (the fingerprint and oneDNN's default both ask); callers must not mutate it."""
    try:
        with open("/proc/cpuinfo") as fh:
            info = parse_cpuinfo(fh.read())
    except OSError:
        info = {"vendor": None, "model": None, "family": None, "model_number": None, "isa": None}
    info["model"] = info["model"] or platform.processor() or platform.machine()
    info["caches"] = cpu_caches()
    return info


def usable_cores() -> Optional[int]:
    """Cores this process may run on (a container or taskset may allow fewer than exist)."""
    try:
        return len(os.sched_getaffinity(0))  # type: ignore[attr-defined]
    except (AttributeError, OSError):
        return os.cpu_count()


def _version(module: str) -> Any:
    mod = sys.modules.get(module)
    return getattr(mod, "__version__", None) if mod is not None else None


def fingerprint() -> Dict[str, Any]:
    import h5py
    import msgpack
    import numpy
    import zstandard

    cpu = cpu_info()
    return {
        "tracekit": __version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu": cpu["model"],
        "cpu_vendor": cpu["vendor"],
        "cpu_family": cpu["family"],
        "cpu_model": cpu["model_number"],
        "cpu_isa": cpu["isa"],
        "cpu_caches": cpu["caches"],
        "cpu_count": os.cpu_count(),
        "cpu_usable": usable_cores(),
        "numpy": numpy.__version__,
        "h5py": h5py.version.version,
        "hdf5": h5py.version.hdf5_version,
        "zstandard": zstandard.__version__,
        "msgpack": ".".join(str(x) for x in msgpack.version),
        "tensorflow": _version("tensorflow"),
        "keras": _version("tf_keras") or _version("keras"),
        "env": recorded_env(dict(os.environ)),
    }


def port_identity(step_fn: Any, model: Any) -> Dict[str, Any]:
    """meta["program"] of a port: its step functions (a dict of them: each) and its model's
    class, and the files they come from; a compiled step (a tf.function, a jax.jit) is named by
    the Python function it wraps."""
    functions = [step_fn[k] for k in sorted(step_fn)] if isinstance(step_fn, Mapping) else [step_fn]
    parts = [getattr(f, "python_function", None) or getattr(f, "__wrapped__", None) or f for f in functions]
    parts += [type(model)] if model is not None else []
    names = ["%s.%s" % (getattr(p, "__module__", "?"), getattr(p, "__qualname__", repr(p))) for p in parts]
    sources = []
    for part in parts:
        try:
            sources.append(inspect.getsourcefile(part))
        except TypeError:  # a builtin or C-implemented callable: no file to hash
            sources.append(None)
    return program_identity(" + ".join(names), sources)


def program_identity(entry: str, sources: Sequence[Optional[str]]) -> Dict[str, Any]:
    """meta["program"]: what computed a trace, so that a comparison can tell two runs of the
    same code from a port. `entry` names it (a script, or a step function and model class),
    `sha256` hashes the source files it came from (None if one cannot be read)."""
    digest = hashlib.sha256()
    for path in sources:
        try:
            with open(str(path), "rb") as fh:
                digest.update(fh.read())
        except (OSError, TypeError):
            return {"entry": entry, "sha256": None}
    return {"entry": entry, "sha256": digest.hexdigest() if sources else None}
