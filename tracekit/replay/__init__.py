"""The replay engine, framework-free (tests/test_framework_free.py): it drives a port through a
golden's steps by a Runner (loop.py), and each framework's adapter provides the Runner
(TensorFlow 2's: tracekit/tf2/tf2_runner.py; PyTorch's and JAX's in tracekit/torch/ and
tracekit/jax/). The public API is the adapter's (`tracekit.tf2`, `tracekit.torch`, `tracekit.jax`).

loop.py        the loop and the Runner protocol it drives; ahead.py reads the next step while the
               port runs, behind.py compares on a thread of its own
options.py     what a replay is asked for (ReplayOptions), checked once; factory.py a port's factory
returned.py    the port's step called, and what it may return, checked against the golden
draws.py       the golden's random draws handed to a port in order (the adapters' tapes)
variables.py   the port's variables found, paired with the golden's (varmap.py, by name; proposal.py,
               what is left), cast and loaded; slots.py the golden's optimizer state in Keras' terms,
               port_state.py the state a port keeps in variables of its own
conversions.py weight layouts as data; forcing.py what teacher forcing set, read back
micro.py       a golden step made of micro-batch runs; source.py a source trace for a run without a golden
patched.py     attributes replaced while a replay step runs
"""
