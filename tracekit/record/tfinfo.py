"""What only TensorFlow can tell about the environment of a recording."""

from __future__ import annotations

from typing import Any, Dict


def tf_environment(tf: Any, session: Any = None) -> Dict[str, Any]:
    info = {
        "version": tf.__version__,
        "git_version": getattr(getattr(tf, "version", None), "GIT_VERSION", None),
        "built_with_cuda": bool(tf.test.is_built_with_cuda()),
        "executing_eagerly": bool(tf.executing_eagerly()),
    }  # type: Dict[str, Any]
    if session is not None:
        try:  # the session's devices: asking device_lib would initialize (and claim) GPUs
            info["devices"] = [{"name": d.name, "type": d.device_type, "memory": int(d.memory_limit_bytes)}
                               for d in session.list_devices()]
        except Exception as exc:
            info["devices"] = "unknown (%s)" % exc
        config = getattr(session, "_config", None)
        if config is not None:
            info["session_config"] = {
                "intra_op_parallelism_threads": config.intra_op_parallelism_threads,
                "inter_op_parallelism_threads": config.inter_op_parallelism_threads,
                "graph_options": str(config.graph_options).strip(),  # Grappler rewrite settings
            }
    return info
