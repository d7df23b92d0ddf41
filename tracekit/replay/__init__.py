"""Replaying goldens through TF2 ports; `tracekit.tf2` is the API.

loop.py      the framework-neutral loop and the Runner protocol it drives
options.py   what a replay is asked for (ReplayOptions), checked once
returned.py  what a port's step may return, checked against the golden
tf2_runner.py  the TensorFlow 2 runner, built from:
  variables.py   finding, pairing (varmap.py: by name, no TensorFlow), loading variables
  optimizer.py   the Keras optimizer's gradients, learning rate, loss, slots in TF1 terms
  keras_optimizers.py  the optimizer classes hooked (every Keras in use, tf.compat.v1.train)
  random_tape.py the golden's random draws injected into TF2's random ops
  capture.py     values of a step, eager or inside a tf.function (per replica under a strategy)
  distribute.py  under a tf.distribute strategy: inputs split, replicas' values joined
settings.py    numerics switches for a replay: op determinism, TF32, Grappler
tf_import.py   TensorFlow, imported with tf-keras selected
"""
