"""`verify`: decode every tensor of a trace, recompute its checksum (crc32, whatever else checked
its bytes on the way), check the structure."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, List, Optional

from .._isolate import ChildCrashed, in_child
from ..errors import TracekitError
from ..keys import INITIAL_STEP
from ._backends.base import short
from ._h5compat import phil
from .held import blind
from ._screen import CRASHES, off_in_this_process
from .opening import open_trace


@dataclass
class VerifyResult:
    """Truthy when the trace is whole: complete, every checksum and the catalog agree."""

    path: str
    steps: int = 0
    values: int = 0
    complete: bool = True
    problems: List[str] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)  # worth saying, not damage (a recording to the path runs)

    @property
    def ok(self) -> bool:
        return self.complete and not self.problems

    def __bool__(self) -> bool:
        return self.ok


def verify(path: str, progress: Optional[Callable[[int, int], None]] = None) -> VerifyResult:
    """Check one trace. Raises TracekitError if it cannot be opened at all; damage found
    inside is collected in `problems`. `progress(done, total)` is called after each step.

    The check reads every byte and every HDF5 object of the file, which is where a damaged
    file can crash the HDF5 library itself; so it runs in a child process (where there is
    fork), and such a crash is a problem found, not the end of the caller's process.
    `progress` is called in that child: it may draw, but what it changes stays there."""
    def child() -> VerifyResult:
        off_in_this_process()  # this child is the isolation: its reads need no screening of their own
        return _verify(path, progress)
    try:
        return in_child(child, hold=phil)
    except ChildCrashed as crash:
        if crash.signal_name not in CRASHES:
            raise TracekitError("%s: the process verifying it was killed (%s), not by a crash of the HDF5 "
                                "library; nothing is known of the file: verify it again" % (path, crash.signal_name))
        return VerifyResult(path, problems=["%s: the HDF5 library crashed reading it (%s); the file is damaged: "
                                            "restore it or record it again" % (path, crash.signal_name)])


def _verify(path: str, progress: Optional[Callable[[int, int], None]]) -> VerifyResult:
    result = VerifyResult(path)
    with open_trace(path) as trace:
        trace._backend.thorough = True  # every leaf's crc32, even where zstd checked the frames' bytes
        result.steps = len(trace)
        if trace.recording:
            result.notes.append(trace.recording)
        result.notes += ["steps of %s record no input and no loss: intact, but a replay of it can check updates only"
                         % kind for kind in blind(trace.meta)]
        if not trace.meta_checked:
            result.notes.append("written before tracekit kept checksums of a golden's metadata and step blobs "
                                "(docs/ROBUSTNESS.md): damage to those cannot be detected in it; goldens this "
                                "tracekit writes carry them")
        if trace.writing:
            result.complete = False
            result.problems.append("%s is unfinished: %s; %d steps are committed so far"
                                   % (path, trace.problem, len(trace)))
        elif not trace.complete:
            result.complete = False
            result.problems.append("%s is unfinished: %s; %d steps are readable. Run `tracekit recover %s` "
                                   "to make it a golden of those steps" % (path, trace.problem, len(trace), path))
        seen = {}
        digested: "dict[str, int]" = {}
        indices = ([INITIAL_STEP] if trace.has_initial else []) + list(range(len(trace)))
        for done, index in enumerate(indices):
            step = trace.initial if index == INITIAL_STEP else trace.step(index)
            try:
                step.info  # noqa: B018  # decodes the step's info
            except TracekitError as exc:
                result.problems.append(str(exc))
            # Whatever fails below is damage to report, not a crash of verify: a damaged file
            # reaches h5py and numpy in ways no narrower list of exceptions foresees.
            try:
                keys = list(step)
            except Exception as exc:  # noqa: BLE001
                result.problems.append("%s: step %d cannot be listed (%s)" % (path, index, _why(exc)))
                continue
            try:
                result.problems.extend(trace._backend.cross_check(index))
            except Exception as exc:  # noqa: BLE001
                result.problems.append("%s: step %d cannot be checked (%s)" % (path, index, _why(exc)))
            for key in keys:
                try:
                    step[key]
                    result.values += 1
                except (TracekitError, KeyError) as exc:
                    result.problems.append(str(exc).strip("'\""))
                except Exception as exc:  # noqa: BLE001
                    result.problems.append("%s: step %d, %s cannot be read (%s)" % (path, index, key, _why(exc)))
                counts = seen.setdefault(key, [0, False])
                if index == INITIAL_STEP:
                    counts[1] = True
                else:
                    counts[0] += 1
            try:
                for key in step.digests:  # decoded, their checksum and every entry checked
                    digested[key] = digested.get(key, 0) + 1
            except Exception as exc:  # noqa: BLE001
                result.problems.append(_why(exc) if isinstance(exc, TracekitError) else
                                       "%s: step %d, its digests cannot be read (%s)" % (path, index, _why(exc)))
            if progress is not None:
                progress(done + 1, len(indices))
        for info in trace.catalog:
            if digested.pop(info.key, 0) != info.digests:
                result.problems.append("%s: the catalog lists digests of %s in %d steps, the file holds them in "
                                       "other steps" % (path, info.key, info.digests))
            counts = seen.pop(info.key, [0, False])
            if counts != [info.steps, info.initial]:
                result.problems.append("%s: the catalog lists %s in %d steps%s, the file holds it in %d%s"
                                       % (path, info.key, info.steps, " and the initial state" if info.initial
                                          else "", counts[0], " and the initial state" if counts[1] else ""))
        for key in list(seen) + list(digested):
            result.problems.append("%s: %s is not in the catalog" % (path, key))
    return result


def _why(exc: Exception) -> str:
    return str(exc) if isinstance(exc, TracekitError) else short(exc)
