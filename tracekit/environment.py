"""The environment fingerprint every trace carries: where its numbers came from.

Two parts, both plain data in a trace's metadata:
- `fingerprint()` -> meta["environment"]: Python and library versions, the CPU (vendor,
  model and the instruction sets that make kernels pick their code path), the cores
  this process may use, and the environment variables that change numerics;
- `tensorflow_environment(tf, session)` -> meta["tensorflow"]: what only the running
  TensorFlow can tell (oneDNN, threads, XLA, determinism, TF32, devices, CUDA/cuDNN).
  It is handed the `tf` module by the recorder or the replayer: this module never
  imports TensorFlow. Runs on TF 1.15 (Python 3.7) and TF 2.x alike.
"""

from __future__ import annotations

import functools
import hashlib
import os
import platform
import sys
from typing import Any, Dict, List, Mapping, Optional, Sequence

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
# TensorFlow >= 2.9 turns oneDNN on by default on Linux when the CPU has one of these
# (TF's util.cc, DefaultOneDnnPolicy); TF_ENABLE_ONEDNN_OPTS overrides it.
ONEDNN_DEFAULT_FLAGS = frozenset(["avx512_vnni", "avx512_bf16", "avx_vnni", "amx_tile", "amx_int8", "amx_bf16"])


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


def keras_binding(modules: Mapping[str, Any] = sys.modules) -> Optional[str]:
    """The Keras TensorFlow 2.16+ bound `tf.keras` to ("keras_3", "tf_keras", "keras_2"); None
    while nothing has used it (or without such a TensorFlow imported). Reads the lazy loader's
    record, or the module it put in its place: nothing is imported."""
    tf = modules.get("tensorflow")
    bound = getattr(tf, "__dict__", {}).get("keras") if tf is not None else None
    if bound is None:
        return None
    own = getattr(bound, "__dict__", {})
    if "_tfll_initialized" in own:  # still the lazy loader
        return own.get("_tfll_keras_version") if own.get("_tfll_initialized") else None
    name = str(own.get("__name__", ""))
    if name.startswith("tf_keras"):
        return "tf_keras"
    if name.startswith("keras"):
        version = str(getattr(modules.get("keras"), "__version__", ""))
        return "keras_3" if version.startswith("3.") else "keras_2"
    return None


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


# ---- what only the running TensorFlow can tell --------------------------------------------------

def tensorflow_environment(tf: Any, session: Any = None) -> Dict[str, Any]:
    """meta["tensorflow"]: the settings and devices of the TensorFlow driving the run.
    `session` is a TF1 Session (its config and devices); without one, TF 2's global
    configuration. Anything TensorFlow cannot answer is recorded as None."""
    info: Dict[str, Any] = {
        "version": tf.__version__,
        "git_version": getattr(getattr(tf, "version", None), "GIT_VERSION", None),
        "built_with_cuda": bool(tf.test.is_built_with_cuda()),
        "executing_eagerly": bool(tf.executing_eagerly()),
    }
    intra = inter = None
    if session is not None:
        try:  # the session's devices: asking device_lib would initialize (and claim) GPUs
            info["devices"] = [{"name": d.name, "type": d.device_type, "memory": int(d.memory_limit_bytes)}
                               for d in session.list_devices()]
        except Exception as exc:
            info["devices"] = "unknown (%s)" % exc
        config = getattr(session, "_config", None)
        if config is not None:
            intra, inter = config.intra_op_parallelism_threads, config.inter_op_parallelism_threads
            info["session_config"] = {
                "intra_op_parallelism_threads": intra,
                "inter_op_parallelism_threads": inter,
                "graph_options": str(config.graph_options).strip(),  # Grappler rewrite settings
            }
            info["xla_jit"] = _enum_name(config.graph_options.optimizer_options.global_jit_level)
    else:
        logical = getattr(tf.config, "list_logical_devices", None) or tf.config.experimental.list_logical_devices
        info["devices"] = _call(lambda: [{"name": d.name, "type": d.device_type} for d in logical()])
        intra = _call(tf.config.threading.get_intra_op_parallelism_threads)
        inter = _call(tf.config.threading.get_inter_op_parallelism_threads)
        jit = _call(tf.config.optimizer.get_jit)  # False/True on older TF 2, '' or a mode name later
        info["xla_jit"] = None if jit is None else ("off" if not jit else "on" if jit is True else str(jit))
        options = _call(tf.config.optimizer.get_experimental_options)  # Grappler switches set by the program
        info["grappler"] = None if options is None else {k: v for k, v in sorted(options.items()) if v is not None}
        info["dtype_policy"] = _dtype_policy()
    cores = usable_cores()
    # 0 lets TensorFlow use every usable core; the count decides how Eigen splits its work.
    info["threads"] = {"intra_op": (intra or cores) if intra is not None else None,
                       "inter_op": (inter or cores) if inter is not None else None}
    info["onednn"] = _onednn(tf)
    info["determinism"] = _determinism(tf)
    info["tf32"] = _call(tf.config.experimental.tensor_float_32_execution_enabled) \
        if hasattr(tf.config.experimental, "tensor_float_32_execution_enabled") else False  # pre-Ampere TF
    info["gpus"] = _gpus(tf, info.get("devices"))
    info["cuda"], info["cudnn"] = _cuda_versions()
    return info


def _dtype_policy() -> Optional[str]:
    """The Keras global dtype policy ("mixed_float16" under mixed precision), of the Keras in use."""
    for name in ("tf_keras", "keras"):
        keras = sys.modules.get(name)
        policy = _call(lambda: keras.mixed_precision.global_policy()) if keras is not None else None
        if policy is not None:
            return str(getattr(policy, "name", policy))
    return None


def _call(func: Any) -> Any:
    try:
        return func()
    except Exception:  # a query this TensorFlow lacks, or a runtime that cannot answer
        return None


def _enum_name(value: Any) -> str:
    """A session's global_jit_level, named as TF 2 reports get_jit(): DEFAULT (0) is off."""
    return {0: "off", -1: "off", 1: "on", 2: "on"}.get(int(value), str(value))


def _onednn(tf: Any) -> Dict[str, Any]:
    """Whether oneDNN's ops replace TensorFlow's own, the build's default for this CPU, and
    the variables that change it. TF 1.15's pip build has no oneDNN ops (its Eigen matrix
    products still dispatch on the CPU's instruction sets)."""
    enabled = None
    for module, name in (("tensorflow.python.util._pywrap_util_port", "IsMklEnabled"),
                         ("tensorflow.python.pywrap_tensorflow", "IsMklEnabled")):
        mod = sys.modules.get(module) or _call(lambda: __import__(module, fromlist=[name]))
        if mod is not None and hasattr(mod, name):
            enabled = bool(_call(getattr(mod, name)))
            break
    env = os.environ
    return {
        "enabled": enabled,
        "default": onednn_default(tf.__version__, cpu_info()["isa"]),
        "env": env.get("TF_ENABLE_ONEDNN_OPTS"),
        "max_cpu_isa": env.get("ONEDNN_MAX_CPU_ISA") or env.get("DNNL_MAX_CPU_ISA") or env.get("MKLDNN_MAX_CPU_ISA"),
    }


def onednn_default(version: str, isa: Optional[List[str]]) -> Optional[bool]:
    """TensorFlow's own oneDNN default on this machine: on for Linux x86 CPUs with the AI
    extensions from TF 2.9, off before (TF 2.5-2.8 only on request, TF 1.x never)."""
    try:
        major, minor = (int(x) for x in version.split(".")[:2])
    except ValueError:
        return None
    if (major, minor) < (2, 9) or not sys.platform.startswith("linux"):
        return False
    return None if isa is None else bool(ONEDNN_DEFAULT_FLAGS.intersection(isa))


def _determinism(tf: Any) -> Any:
    """Op determinism (TF >= 2.8's switch), else what TF_DETERMINISTIC_OPS asks for."""
    try:
        from tensorflow.python.framework import config as tf_config  # the running TF's own module

        return bool(tf_config.is_op_determinism_enabled())
    except (ImportError, AttributeError):
        return os.environ.get("TF_DETERMINISTIC_OPS", "0").lower() in ("1", "true")


def _gpus(tf: Any, devices: Any) -> List[Dict[str, Any]]:
    """Name and compute capability of each GPU the run uses."""
    names = [d.get("name", "") for d in devices or [] if isinstance(d, dict) and d.get("type") == "GPU"]
    if not names:
        return []
    details = getattr(tf.config.experimental, "get_device_details", None)
    if details is not None:  # TF 2
        out = []
        for gpu in _call(lambda: tf.config.list_physical_devices("GPU")) or []:
            d = _call(lambda: details(gpu)) or {}
            cc = d.get("compute_capability")
            out.append({"name": d.get("device_name"), "compute_capability": "%d.%d" % cc if cc else None})
        return out
    return [{"name": name, "compute_capability": None} for name in names]  # TF 1: names only


def _cuda_versions() -> Any:
    """CUDA and cuDNN versions TensorFlow was built with (None on a CPU build)."""
    module = "tensorflow.python.platform.build_info"
    info = sys.modules.get(module) or _call(lambda: __import__(module, fromlist=["build_info"]))
    build = getattr(info, "build_info", None)
    if isinstance(build, dict):  # TF 2
        return (build.get("cuda_version"), build.get("cudnn_version")) if build.get("is_cuda_build") else (None, None)
    if getattr(info, "is_cuda_build", False):  # TF 1.15
        return getattr(info, "cuda_version_number", None), getattr(info, "cudnn_version_number", None)
    return None, None
