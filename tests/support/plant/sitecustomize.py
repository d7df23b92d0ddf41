"""Python imports this at start where a test puts this folder on PYTHONPATH. With
TRACEKIT_PLANT="VARIABLE@K" it plants a wrong step in what a recording holds: the variable's
value the recorder reads after step K is moved 1.5 times as far as the step moved it, a golden
whose step is not what its update computes, which the audit must catch, naming both. The
program recorded is not changed. Python 3.7 syntax."""
import os

_PLANT = os.environ.get("TRACEKIT_PLANT")
if _PLANT:
    from tracekit.record import state as _state

    _VAR, _STEP = _PLANT.rsplit("@", 1)
    _READ = _state.RecordedState.read
    _READS = []

    def _planted(self, sess, run):
        got = _READ(self, sess, run)
        _READS.append(got)
        if len(_READS) == int(_STEP) + 2:  # the initial read, then one after each step
            previous = {key: value for key, _, value in _READS[-2]}
            key = "var/" + _VAR
            got = [(k, v, previous[k] + 1.5 * (value - previous[k]) if k == key else value) for k, v, value in got]
        return got

    _state.RecordedState.read = _planted
