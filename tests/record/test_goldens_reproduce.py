"""The shipped goldens are what the scripts in tools/goldens produce on TF 1.15.5, on any machine:

- two recordings on one machine are bit-identical (recording is deterministic);
- a rerun on a machine whose kernel-selecting fingerprint matches the golden's is compared bit
  for bit ("exact"), and where another host of the same fingerprint differs in the last bits, it
  is held to the round-off bound; on any other machine it reproduces it within the documented
  cross-machine round-off bound (Tolerance.roundoff(), docs/NUMERICS.md);
- goldens recorded on another machine (tests/data/foreign_cpu: AVX2, no AVX-512) reproduce
  the same way.
"""

from __future__ import annotations

import os
import sys
from dataclasses import replace

import numpy as np
import pytest

import tracekit
from tracekit import Tolerance
from tracekit.comparison.envdiff import environment_diff

from ..support import FOREIGN_GOLDENS as FOREIGN
from ..support import GOLDENS, ROOT, golden, run_python

pytestmark = pytest.mark.tf1


def same_tensors(a_path, b_path, racy=()):
    """Every tensor bit-identical, but those in `racy`: values the legacy code itself reads
    racily (the Estimator's StopAtStepHook fetches global_step in the run that increments it)."""
    with tracekit.open(a_path) as a, tracekit.open(b_path) as b:
        assert len(a) == len(b) and [t.key for t in a.catalog] == [t.key for t in b.catalog]
        for sa, sb in zip([a.initial] + list(a), [b.initial] + list(b)):
            assert list(sa) == list(sb)
            for key in sa:
                if key in racy:
                    continue
                va, vb = sa[key], sb[key]
                if isinstance(va, (np.ndarray, np.generic)):  # a scalar as older goldens keep it, or 0-d
                    va, vb = np.asarray(va), np.asarray(vb)
                    assert va.dtype == vb.dtype and va.tobytes() == vb.tobytes(), (sa.index, key)
                else:
                    assert repr(va) == repr(vb), (sa.index, key)


def reproduces(golden_path, out, racy=(), noise_from=None):
    """`out` reproduces the golden: bit for bit where the fingerprints say the kernels are the
    same, else within the round-off bound. Returns the comparison.

    noise_from: a gradient at the noise floor by design (a bias right before batch norm). On
    other kernels its round-off differs, and Adam amplifies it past any round-off bound in the
    variables it drives: there the comparison accepts explained noise, all of it rooted there."""
    with tracekit.open(golden_path) as golden, tracekit.open(out) as actual:
        assert [t.key for t in golden.catalog] == [t.key for t in actual.catalog] and len(golden) == len(actual)
        diff = environment_diff(golden.meta, actual.meta)
        result = tracekit.compare(golden, actual)  # the environments choose the tolerance
        if not diff.same_kernels and noise_from is not None:
            assert result.profile.name == "round-off", result.report()
            result = tracekit.compare(golden, actual, replace(Tolerance.roundoff(), accept_noise=True))
            assert all(n.key == noise_from or n.source in (noise_from, "var/" + noise_from.split("/", 1)[1])
                       for n in result.noise), result.report()
    if diff.same_kernels:
        assert result.profile.name == "exact", result.report()
        if result.ok:
            same_tensors(golden_path, out, racy)
        else:  # equal fingerprints on another machine (another host of the same CPU model) are no promise of
            # equal bits: seen off by one ulp on the same AMD EPYC model; still within the round-off bound
            result = tracekit.compare(golden_path, out, Tolerance.roundoff())
    elif noise_from is None:
        assert result.profile.name == "round-off", result.report()
    assert result.ok, result.report()
    return result


def record(tmp_path, script, name, args):
    out = str(tmp_path / name)
    run_python(sys.executable, [os.path.join(ROOT, "tools", "goldens", script), out] + args,
               env={"PYTHONHASHSEED": "0"})
    return out


@pytest.mark.parametrize("script, name, args, racy", [
    ("seed_example.py", "seed_example.h5", ["--steps", "100"], ()),
    ("estimator_model.py", "estimator_model.h5", ["--steps", "50"], ("fetch/fetches",)),
])
def test_api_goldens_reproduce(tmp_path, script, name, args, racy):
    out = record(tmp_path, script, name, args)
    reproduces(os.path.join(GOLDENS, name), out, racy)
    reproduces(os.path.join(FOREIGN, name), out, racy)


@pytest.mark.parametrize("script, name, args, racy", [
    ("rnn_model.py", "lstm_model.h5", ["--cell", "lstm"], ()),
    ("rnn_model.py", "gru_model.h5", ["--cell", "gru"], ()),
    ("two_optimizers.py", "two_optimizers.h5", [], ()),
    ("momentum_model.py", "momentum_model.h5", [], ("fetch/fetches",)),
    ("gan_model.py", "gan_model.h5", [], ()),
])
def test_later_api_goldens_reproduce(tmp_path, script, name, args, racy):
    # The other machine recorded only three of the goldens: compared with the shipped ones.
    reproduces(os.path.join(GOLDENS, name), record(tmp_path, script, name, args), racy)


def test_keras_fit_golden_reproduces(tmp_path):
    # TF1 Keras fit, recorded with the zero-code launcher; no copy from the other machine.
    out = str(tmp_path / "keras_fit.h5")
    run_python(sys.executable, ["-m", "tracekit", "record", "-o", out, "--",
                                os.path.join(ROOT, "tools", "goldens", "keras_fit.py")], env={"PYTHONHASHSEED": "0"})
    reproduces(golden("keras_fit"), out, noise_from="grad/hidden/bias:0")


def test_zero_code_golden_reproduces(tmp_path):
    out = str(tmp_path / "slim_resnet.h5")
    run_python(sys.executable, ["-m", "tracekit", "record", "-o", out, "--",
                                os.path.join(ROOT, "tools", "goldens", "slim_resnet.py"), "--steps", "5"],
               env={"PYTHONHASHSEED": "0"})
    reproduces(golden("slim_resnet"), out)
    reproduces(os.path.join(FOREIGN, "slim_resnet.h5"), out)


def test_two_recordings_on_one_machine_are_bit_identical(tmp_path):
    first = record(tmp_path, "seed_example.py", "first.h5", ["--steps", "20"])
    second = record(tmp_path, "seed_example.py", "second.h5", ["--steps", "20"])
    with tracekit.open(first) as a, tracekit.open(second) as b:
        assert environment_diff(a.meta, b.meta).same_kernels  # the fingerprint is stable too
    result = tracekit.compare(first, second)
    assert result.profile.name == "exact" and result.ok, result.report()
    same_tensors(first, second)

