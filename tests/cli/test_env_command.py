"""`tracekit env` prints this machine's fingerprint; `tracekit show` names a golden's machine."""

from __future__ import annotations

import json
import os
import sys

from tracekit.cli import main

from ..support import ROOT


def test_env_without_tensorflow(capsys):
    assert main(["env", "--no-tensorflow", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert "tensorflow" not in data
    env = data["environment"]
    assert env["cpu_usable"] >= 1 and env["python"] == sys.version.split()[0]
    if sys.platform.startswith("linux") and env["machine"] == "x86_64":
        assert "sse4_2" in env["cpu_isa"] and env["cpu_vendor"] and env["cpu_caches"]
    assert main(["env", "--no-tensorflow"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("machine   TensorFlow not recorded, ") and "environment.cpu_isa" in text


def test_env_with_tensorflow(capsys):
    """In either environment: TF 1.15.5 (no oneDNN ops) or TF 2.21 (oneDNN by the CPU's default)."""
    assert main(["env", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    tf = data["tensorflow"]
    assert tf["version"] == sys.modules["tensorflow"].__version__ == data["environment"]["tensorflow"]
    assert tf["onednn"]["enabled"] in (True, False) and tf["threads"]["intra_op"] >= 1
    assert tf["onednn"]["enabled"] == (tf["onednn"]["default"] if tf["onednn"]["env"] is None else
                                       tf["onednn"]["env"].lower() in ("1", "true"))
    assert tf["xla_jit"] == "off" and isinstance(tf["gpus"], list) and "CPU" in {d["type"] for d in tf["devices"]}
    if tf["version"].startswith("1."):
        assert tf["onednn"]["enabled"] is False and tf["tf32"] is False


def test_show_names_the_goldens_machine(capsys):
    assert main(["show", os.path.join(ROOT, "goldens", "seed_example.h5")]) == 0
    machine = [line for line in capsys.readouterr().out.splitlines() if line.startswith("machine ")]
    assert len(machine) == 1 and "TensorFlow 1.15.5" in machine[0] and "ISA unknown" not in machine[0]
    assert main(["show", os.path.join(ROOT, "tests", "data", "foreign_cpu", "seed_example.h5")]) == 0
    machine = [line for line in capsys.readouterr().out.splitlines() if line.startswith("machine ")]
    assert "AVX2 +FMA" in machine[0] and "AVX-512" not in machine[0]  # the other machine's instruction sets
