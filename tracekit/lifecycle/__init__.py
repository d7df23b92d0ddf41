"""The golden lifecycle: goldens rewritten from TF2 runs with their provenance, actual traces
kept for review when a replay differs, and review itself. No TensorFlow.

workspace.py  the `.tracekit` directory of a project (pending/, history/), and CI detection
atomic.py     writes that never leave a torn file: a lock per goldens directory, fsync, rename
drift.py      how a golden's data changed when it was replaced, per kind
update.py     write a golden from a TF2 run's trace, keeping the replaced one and its history
pending.py    actual traces kept for review; accept and reject
run.py        what one test run did with its goldens, and which goldens it left unused
"""
