"""Replay a shipped port in a fresh process, so that TensorFlow starts with this process's
environment (TF_ENABLE_ONEDNN_OPTS, ONEDNN_MAX_CPU_ISA are read once, at start-up).

    python tests/replay/replay_child.py NAME GOLDEN OUT STEPS
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import tracekit.tf2  # noqa: E402
from tools.corpus.ports import estimator_wide_deep  # noqa: E402
from tools.ports import estimator_model, seed_example  # noqa: E402

PORTS = {"seed_example": seed_example.make, "estimator_model": estimator_model.make,
         # the canned Wide & Deep recorded with --hidden 32 (test_wide_deep.py's big batch)
         "wide_deep_32": lambda: estimator_wide_deep.port(tracekit.tf2.tf, hidden=32)[:2]}

if __name__ == "__main__":
    name, golden, out, steps = sys.argv[1:5]
    model, step = PORTS[name]()
    tracekit.tf2.replay(golden, step, model=model, out=out, steps=int(steps))
