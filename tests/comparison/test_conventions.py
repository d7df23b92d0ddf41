"""Known TF1/Keras optimizer-convention differences named in the report: the momentum
convention under a changing learning rate, Adam's epsilon; and no hint where they do not
apply."""

from __future__ import annotations

import numpy as np

import tracekit
from tracekit.comparison.conventions import ADAM_EPSILON, MOMENTUM

from ..support import build_golden


def _momentum_trace(path, lr_at, drift_from=None):
    """SGD with momentum on one variable; lr_at(k) the learning rate; from `drift_from` on the
    variable drifts as a port with another convention would."""
    def steps():
        for k in range(5):
            w = np.full(3, 1.0 - 0.01 * k, "f4")
            if drift_from is not None and k >= drift_from:
                w = w + np.float32(1e-3)
            yield {"input/x:0": np.ones(3, "f4"), "lr/learning_rate": np.float32(lr_at(k)),
                   "grad/w:0": np.full(3, 0.5, "f4"), "var/w:0": w, "slot/w/Momentum:0": np.full(3, 0.5, "f4")}
    return build_golden(path, steps(), {"var/w:0": np.ones(3, "f4")})


def test_a_divergence_after_the_learning_rate_changes_names_the_momentum_convention(tmp_path):
    decay = lambda k: 0.1 if k < 2 else 0.05
    golden = _momentum_trace(str(tmp_path / "g.h5"), decay)
    actual = _momentum_trace(str(tmp_path / "a.h5"), decay, drift_from=2)
    result = tracekit.compare(golden, actual)
    assert [(h.code, h.step, h.key, h.lr_change) for h in result.conventions] == [
        (MOMENTUM, 2, "var/w:0", (2, np.float32(0.1), np.float32(0.05)))]
    head = result.report().split("tensors (worst step")[0]
    assert "possible cause: the momentum convention" in head and "changes at step 2 (0.1 -> 0.05)" in head


def test_no_momentum_hint_while_the_learning_rate_is_constant(tmp_path):
    constant = lambda k: 0.1
    golden = _momentum_trace(str(tmp_path / "g.h5"), constant)
    result = tracekit.compare(golden, _momentum_trace(str(tmp_path / "a.h5"), constant, drift_from=2))
    assert not result.ok and result.conventions == []
    assert "possible cause" not in result.report()


def _adam_trace(path, var_delta=0.0, grad_delta=0.0, moving_delta=0.0):
    def steps():
        yield {"grad/w:0": np.full(3, 0.5, "f4") + np.float32(grad_delta), "lr/learning_rate": np.float32(0.01),
               "var/w:0": np.full(3, 0.99, "f4") + np.float32(var_delta),
               "var/bn/moving_mean:0": np.zeros(3, "f4") + np.float32(moving_delta),
               "slot/w/Adam:0": np.full(3, 0.05, "f4"), "slot/w/Adam_1:0": np.full(3, 2.5e-4, "f4")}
    return build_golden(path, steps(), {"var/w:0": np.ones(3, "f4")})


def test_an_update_that_alone_differs_names_adams_epsilon(tmp_path):
    golden = _adam_trace(str(tmp_path / "g.h5"))
    result = tracekit.compare(golden, _adam_trace(str(tmp_path / "a.h5"), var_delta=1e-3))
    assert [(h.code, h.step, h.key) for h in result.conventions] == [(ADAM_EPSILON, 0, "var/w:0")]
    assert "possible cause: Adam's epsilon" in result.report()
    # not when the gradients differ too (the cause is upstream), nor for a variable Adam does not update
    assert tracekit.compare(golden, _adam_trace(str(tmp_path / "b.h5"), var_delta=1e-3,
                                                grad_delta=1e-3)).conventions == []
    moving = tracekit.compare(golden, _adam_trace(str(tmp_path / "c.h5"), moving_delta=1e-3))
    assert moving.first_divergence.key == "var/bn/moving_mean:0" and moving.conventions == []


def _sparse_trace(path, moved_rows=(), port_indices=None):
    """An embedding table of 6 rows whose step-0 sparse gradient names rows 1, 3 and 4 (TF1's,
    deduplicated); the port's names row 1 twice (`port_indices`). `moved_rows` of the updated
    table differ by 1e-3, as another optimizer rule would make them."""
    table = np.arange(24, dtype="f4").reshape(6, 4) / 24
    named = np.array([1, 3, 4])
    indices = named if port_indices is None else np.array(port_indices)
    counts = np.array([list(indices).count(i) for i in indices], "f4")
    values = np.ones((len(indices), 4), "f4") / counts[:, None]  # each index's rows sum to TF1's row
    after = table.copy()
    after[named] -= np.float32(0.01)
    for row in moved_rows:
        after[row] += np.float32(1e-3)
    step = {"input/ids:0": np.array([1, 3, 4], "i4"), "lr/learning_rate": np.float32(0.01),
            "grad/table:0/values": values, "grad/table:0/indices": indices, "var/table:0": after}
    return build_golden(path, [step], {"var/table:0": table}, meta={"slots": {}})


def test_a_difference_in_the_rows_of_a_repeated_index_names_the_sparse_per_row_update(tmp_path):
    from tracekit.comparison.conventions import SPARSE_ROWS, SPARSE_UNNAMED

    golden = _sparse_trace(str(tmp_path / "g.h5"))
    # Keras 3's Adam: the port's gradient repeats row 1 (summed, the same rows), only row 1 moves
    actual = _sparse_trace(str(tmp_path / "a.h5"), moved_rows=[1], port_indices=[1, 3, 1, 4])
    result = tracekit.compare(golden, actual)
    assert [(h.code, h.key, h.rows) for h in result.conventions] == [(SPARSE_ROWS, "var/table:0", (1, 1, 1))], \
        result.report()
    assert "possible cause: a sparse gradient's repeated rows" in result.report()
    # the rows no index names moved: a densified sparse update (both Kerases' Ftrl)
    actual = _sparse_trace(str(tmp_path / "b.h5"), moved_rows=[0, 2, 5])
    result = tracekit.compare(golden, actual)
    assert [(h.code, h.rows) for h in result.conventions] == [(SPARSE_UNNAMED, (3, 3, 3))], result.report()
    assert "possible cause: a sparse gradient made dense" in result.report()
    # a named row moved as well: neither
    actual = _sparse_trace(str(tmp_path / "c.h5"), moved_rows=[0, 2, 3, 5])
    assert not [h for h in tracekit.compare(golden, actual).conventions if h.code in (SPARSE_ROWS, SPARSE_UNNAMED)]
