"""The environment fingerprint every trace carries: where its numbers came from.

Never imports TensorFlow: its version is reported only if the process already
loaded it. The recorder and replayer add what only TensorFlow can tell (devices,
Grappler settings).
"""

from __future__ import annotations

import os
import platform
import sys
from typing import Any, Dict

from ._version import __version__

# Variables that change numerics or determinism.
ENV_PREFIXES = ("TF_", "CUDA_", "XLA_", "OMP_", "MKL_", "KMP_", "NVIDIA_TF32")
ENV_EXTRA = ("PYTHONHASHSEED",)
# Never recorded: Terraform shares the TF_ prefix (TF_VAR_* often holds secrets), and
# nothing that looks like a credential belongs in a golden that gets committed.
ENV_EXCLUDED_PREFIXES = ("TF_VAR_", "TF_CLI_", "TF_TOKEN_", "TF_LOG", "TF_REGISTRY_", "TF_PLUGIN_",
                         "TF_WORKSPACE", "TF_DATA_DIR", "TF_INPUT", "TF_IN_AUTOMATION", "TF_IGNORE",
                         "TF_STATE_", "TF_APPEND_USER_AGENT")
ENV_SECRET_WORDS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "API_KEY", "ACCESS_KEY", "PRIVATE")


def recorded_env(environ: "Dict[str, str]") -> Dict[str, str]:
    """The environment variables a trace keeps."""
    return {k: v for k, v in sorted(environ.items())
            if (k.startswith(ENV_PREFIXES) or k in ENV_EXTRA) and not k.startswith(ENV_EXCLUDED_PREFIXES)
            and not any(word in k.upper() for word in ENV_SECRET_WORDS)}


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _version(module: str) -> Any:
    mod = sys.modules.get(module)
    return getattr(mod, "__version__", None) if mod is not None else None


def fingerprint() -> Dict[str, Any]:
    import h5py
    import msgpack
    import numpy
    import zstandard

    env = recorded_env(dict(os.environ))
    return {
        "tracekit": __version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "numpy": numpy.__version__,
        "h5py": h5py.version.version,
        "hdf5": h5py.version.hdf5_version,
        "zstandard": zstandard.__version__,
        "msgpack": ".".join(str(x) for x in msgpack.version),
        "tensorflow": _version("tensorflow"),
        "keras": _version("tf_keras") or _version("keras"),
        "env": env,
    }
