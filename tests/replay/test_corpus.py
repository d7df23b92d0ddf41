"""The corpus (docs/CORPUS.md): public TF1 programs installed from the package registry, each
recorded zero-code for real in TF 1.15 and replayed through the TF2 port a team would write;
each must match at the training preset. Programs marked slow say why."""

from __future__ import annotations

import pytest

import tracekit
from tracekit.keys import UNCLIPPED
from tools.corpus import PROGRAMS, record, replay


def _param(program):
    marks = [pytest.mark.slow] if program.slow else []
    return pytest.param(program, id=program.name, marks=marks)


@pytest.mark.parametrize("program", [_param(p) for p in PROGRAMS])
def test_the_port_of_a_public_program_matches(legacy_python, tmp_path, program):
    golden = str(tmp_path / (program.name + ".h5"))
    record(program, legacy_python, golden, str(tmp_path / "work"))
    result = replay(program, golden)
    assert result.ok and not result.missing, result.report()
    # nothing trained is left out: every variable a step trained, and its gradient, was compared
    with tracekit.open(golden) as trace:
        trained = {_variable(n) for n in trace.names("grad")}
    compared = {t.key for t in result.tensors}
    wanted = {"grad/" + n for n in trained} | {"var/" + n for n in trained}
    assert wanted <= compared, sorted(wanted - compared)


def _variable(grad_name):
    """The variable of a gradient's name: a sparse one's rows and indices are its two parts, and a
    clipped one's gradient before clipping is beside it."""
    for part in ("/values", "/indices", UNCLIPPED):
        if grad_name.endswith(part):
            return grad_name[:-len(part)]
    return grad_name
