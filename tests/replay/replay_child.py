"""Replay a shipped port in a fresh process, so that TensorFlow starts with this process's
environment (TF_ENABLE_ONEDNN_OPTS, ONEDNN_MAX_CPU_ISA are read once, at start-up).

    python tests/replay/replay_child.py NAME GOLDEN OUT STEPS
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import tracekit.tf2  # noqa: E402
from tools.ports import estimator_model, seed_example  # noqa: E402

PORTS = {"seed_example": seed_example.make, "estimator_model": estimator_model.make}

if __name__ == "__main__":
    name, golden, out, steps = sys.argv[1:5]
    model, step = PORTS[name]()
    tracekit.tf2.replay(golden, step, model=model, out=out, steps=int(steps))
