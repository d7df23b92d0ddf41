"""The suite and its explanations hold on an instruction set other than this machine's:
oneDNN's ISA cap (ONEDNN_MAX_CPU_ISA, with TF_ENABLE_ONEDNN_OPTS=1) makes TensorFlow 2 run
other matrix kernels on this very CPU, as another machine would."""

from __future__ import annotations

import os
import sys


import tracekit
from tracekit.comparison.envdiff import environment_diff

from ..support import ROOT, run_python
from ..support import golden
from ..support.stats_oracle import same_as_oracle

CHILD = os.path.join(ROOT, "tests", "replay", "replay_child.py")
ONEDNN_VARIABLES = ("TF_ENABLE_ONEDNN_OPTS", "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA")
# Later steps accumulate round-off through the optimizer (tools/replay_examples.py).
TRAINING = tracekit.Tolerance.training()


def replay(tmp_path, label, steps, **env):
    """Replay the Estimator port in a child process, on the CPU, with oneDNN on (as TF turns it on
    by default on CPUs with AVX512_VNNI or AMX) and `env` added."""
    out = str(tmp_path / (label + ".h5"))
    env = dict(env, TF_ENABLE_ONEDNN_OPTS="1", CUDA_VISIBLE_DEVICES="")
    run_python(sys.executable, [CHILD, "estimator_model", golden("estimator_model"), out, str(steps)],
               env=env, unset=[v for v in ONEDNN_VARIABLES if v not in env])
    return out


def test_another_instruction_set_is_explained_not_blamed(tmp_path):
    widest = replay(tmp_path, "widest", 10)  # oneDNN on this CPU's widest instruction set
    capped = replay(tmp_path, "sse41", 10, ONEDNN_MAX_CPU_ISA="SSE41")
    with tracekit.open(widest) as a, tracekit.open(capped) as b:
        assert a.meta["tensorflow"]["onednn"]["enabled"] is True and b.meta["tensorflow"]["onednn"]["enabled"]
        assert b.meta["tensorflow"]["onednn"]["max_cpu_isa"] == "SSE41"
        diff = environment_diff(a.meta, b.meta)
    # Only the cap differs: whatever differs in the results, the cap's kernels did it.
    assert [c.field for c in diff.kernel_changes] == ["oneDNN ISA cap"]
    # Two replays of one port: the same code, so a mismatch at all needs explaining.
    exact = tracekit.compare(widest, capped, tracekit.Tolerance.exact())
    assert not exact.ok, "SSE4.1 kernels summed in this CPU's widest vectors' order: nothing was forced"
    cause = exact.likely_cause
    assert cause is not None and cause.likely and cause.ulps <= cause.bound, exact.report()
    assert "likely cause: the machine, not the code" in exact.report()
    assert "oneDNN ISA cap: none -> SSE41" in exact.report()
    auto = tracekit.compare(widest, capped)
    assert auto.profile.name == "round-off" and auto.ok, auto.report()
    assert auto.report().startswith("MATCH (within round-off; golden recorded on TensorFlow 2.21")
    for tolerance in (None, tracekit.Tolerance.exact()):  # the fast statistics are the float64 ones
        same_as_oracle(widest, capped, tolerance)
    # The port holds the examples' tolerance against the TF 1.15 golden on either code path.
    for path in (widest, capped):
        against_golden = tracekit.compare(golden("estimator_model"), path, TRAINING)
        assert against_golden.ok, against_golden.report()

