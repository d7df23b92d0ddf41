"""tracekit for TF2 ports: `tracekit.tf2.replay(golden, step_fn, ...)`, `check`, `localize`,
`calibrate`, `derive` (a golden derived from a TF2 run) and the weight conversions.

Imports TensorFlow (selecting tf-keras, Keras 2, before the first import on TF >= 2.16).

    drive.py     the replay: the runner and loop, derived goldens (derive), seeded()
    live.py      check(): a replay compared as it runs; the verdict on long goldens
    diagnose.py  localize() and calibrate(): the replays that find and measure
    reproduction.py  the script localize writes beside its one-step reproduction (a template)
    verdict.py   the verdict on long goldens: local errors, the arbiter, the drift envelope
    arbiter.py   the float64 arbiter's replays of one step, and the layers whose decisions flipped

TensorFlow's adapter to the replay engine (tracekit/replay/, framework-free):
    tf2_runner.py  the runner, built from:
      optimizer.py   the Keras optimizer's gradients, learning rate, loss, slots in TF1 terms
                     (gradients.py, optimizer_terms.py, counters.py)
      keras_optimizers.py  the optimizer classes hooked (every Keras in use, tf.compat.v1.train)
      random_tape.py the golden's random draws injected into TF2's random ops
      capture.py     values of a step, eager or inside a tf.function (per replica under a
                     strategy); graph_digests.py their digests made there
      distribute.py  under a tf.distribute strategy: inputs split, replicas' values joined
      perturb.py     the perturbed replays that make the envelope
    port_step.py   calling a port's step; settings.py numerics switches (determinism, TF32, Grappler)
    sources.py     the port's source lines; tf_import.py TensorFlow, imported with tf-keras selected
"""

from __future__ import annotations

from ..replay.conversions import Conversion, gru, lstm, partitioned, transpose
from .distribute import logical_cpus, mirrored
from .port_step import keras_train_step
from .tf_import import tf  # tracekit.tf2.tf: the TensorFlow the replay drives
from .diagnose import calibrate, localize
from .drive import derive, record, replay, seeded
from .live import check

__all__ = ["Conversion", "calibrate", "check", "derive", "gru", "keras_train_step", "localize", "logical_cpus", "lstm",
           "mirrored", "partitioned", "record", "replay", "seeded", "transpose"]
