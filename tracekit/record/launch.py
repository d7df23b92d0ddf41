"""Zero-code recording: run an unmodified legacy script with every session recorded.

    tracekit record -o OUT.h5 [--seed N] [--seed-mode M] [--every K] [--steps N]
                    [--loss NAME] [--learning-rate NAME] [--train-op NAME] [--gradient VAR=TENSOR]
                    [--worker N]
                    -- script.py ARGS...

The script runs in this process, as `python script.py ARGS...` would run it
(`__main__`, its own sys.argv and directory on sys.path), inside a recorder
attached to every session, so Session.run, MonitoredSession/Estimator/tf_slim
loops and TF1 Keras fit are all seen. With --steps the script is stopped once
that many steps are recorded. Whatever happens, the steps recorded so far are
left as a golden.
"""

from __future__ import annotations

import importlib.util
import os
import runpy
import sys
from typing import Callable, List, Optional, Tuple

from ..errors import UsageError
from .declared import Declared
from .recorder import Recorder, StopRecording


def _module_file(module: str) -> Optional[str]:
    try:
        return getattr(importlib.util.find_spec(module), "origin", None)
    except (ImportError, ValueError):
        return None  # runpy reports it properly


def run_script(argv: List[str], out: str, seed: Optional[int] = None, seed_mode: Optional[str] = None,
               every: int = 1, steps: Optional[int] = None,
               progress: Optional[Callable[[int, Optional[int]], None]] = None,
               declared: Optional[Declared] = None, worker: Optional[int] = None,
               budget: "int | str | None" = None, digests: bool = True,
               loss_parts: bool = False) -> Tuple[int, List[str]]:
    """Run `argv` (a script and its arguments, or `-m module ...`) recorded; returns its exit
    code and the golden's warnings. progress(steps recorded, steps asked for or None) is called
    after each step."""
    if not argv:
        raise UsageError("nothing to record: give the script after --, e.g. tracekit record -o out.h5 -- train.py")
    module = None
    if argv[0] == "-m":
        if len(argv) < 2:
            raise UsageError("-m needs a module name")
        module, argv = argv[1], argv[1:]
    elif not os.path.isfile(argv[0]):
        raise UsageError("no script at %s" % argv[0])
    meta = {"script": argv[0] if module is None else "-m " + module, "argv": list(argv)}
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv = list(argv)
    sys.path.insert(0, os.path.dirname(os.path.abspath(argv[0])) if module is None else os.getcwd())
    program = argv[0] if module is None else _module_file(module)
    code = 0
    try:
        with Recorder(out, seed=seed, seed_mode=seed_mode, every=every, steps=steps, meta={"zero_code": meta},
                      stop_script=steps is not None, program=program, progress=progress,
                      declared=declared, worker=worker, budget=budget, digests=digests,
                      loss_parts=loss_parts) as recorder:
            recorder.attach_all()
            try:
                if module is None:
                    runpy.run_path(argv[0], run_name="__main__")
                else:
                    runpy.run_module(module, run_name="__main__", alter_sys=True)
            except StopRecording:
                pass
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
    return code, recorder.warnings
