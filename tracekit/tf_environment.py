"""What only the running TensorFlow can tell of a trace's environment: meta["tensorflow"]
(oneDNN, threads, XLA, determinism, TF32, devices, CUDA/cuDNN), and which Keras `tf.keras`
is bound to. Handed the `tf` module by the recorder or the replayer, this module never
imports TensorFlow itself; it runs on TF 1.15 (Python 3.7) and TF 2.x alike.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Dict, List, Mapping, Optional

from .environment import cpu_info, usable_cores

# TensorFlow >= 2.9 turns oneDNN on by default on Linux when the CPU has one of these
# (TF's util.cc, DefaultOneDnnPolicy); TF_ENABLE_ONEDNN_OPTS overrides it.
ONEDNN_DEFAULT_FLAGS = frozenset(["avx512_vnni", "avx512_bf16", "avx_vnni", "amx_tile", "amx_int8", "amx_bf16"])


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
