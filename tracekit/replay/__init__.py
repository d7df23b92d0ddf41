"""Replaying goldens through TF2 ports. loop.py is the framework-neutral loop, tf2.py
the TensorFlow 2 runner, varmap.py the variable matching; `tracekit.tf2` is the API."""
