"""Where a tensor comes from in the user's code: the source line, shared by both worlds.

The recorder keeps, for each recorded tensor, the line of the TF1 program that made its op (a
variable: where it was created, and the lines that compute its update); a replay keeps the
port's line for its taps, its loss and each variable's update. A report shows both beside
the first divergence and a named cause.

The line is the innermost frame of the user's code: frames of TensorFlow, Keras, the test
runner, the standard library and tracekit itself are skipped. Code a user installed (a model
zoo's package) is the user's. Python 3.7 syntax (the recorder imports this); no TensorFlow.
"""

from __future__ import annotations

import ast
import bisect
import functools
import linecache
import os
import sysconfig
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

# Installed packages whose frames are the framework's, not the user's: TensorFlow and what
# comes with it, Keras, the test runner and the libraries between the user and TensorFlow.
LIBRARIES = frozenset([
    "tensorflow", "tensorflow_core", "tensorflow_estimator", "tensorflow_hub", "tensorflow_gan",
    "tensorflow_probability", "tf_keras", "tf_slim", "keras", "absl", "six", "wrapt", "gast", "numpy", "h5py",
    "_pytest", "pytest", "pluggy", "tracekit", "hypothesis", "google", "typing_extensions",
])
_TRACEKIT = os.path.dirname(os.path.abspath(__file__))
_STDLIB = tuple(sorted({os.path.abspath(p) for p in (sysconfig.get_paths().get("stdlib"),
                                                      sysconfig.get_paths().get("platstdlib")) if p}))
CODE_CHARS = 120  # a line's text kept, at most
LINES_KEPT = 8  # of a variable's update, at most


@dataclass(frozen=True)
class Source:
    """One line of the user's code: `file` relative to the working directory of the run where it
    is under it, else as the program ran it; `code` its text (whitespace
    collapsed); `caller` the user's line that called it, where this line is a helper's return
    (`mse` in a utilities module, called where the loss is built)."""

    file: str
    line: int
    function: str = ""
    code: str = ""
    caller: Optional["Source"] = None

    def short(self) -> str:
        """"optimization.py:87 `update += weight_decay_rate * param`"."""
        where = "%s:%d" % (os.path.basename(self.file), self.line)
        text = "%s `%s`" % (where, self.code) if self.code else where
        return text + (" (called at %s)" % self.caller.short() if self.caller is not None else "")

    def to_meta(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {"file": self.file, "line": self.line, "function": self.function, "code": self.code}
        if self.caller is not None:
            out["caller"] = self.caller.to_meta()
        return out

    @classmethod
    def of(cls, stored: Any) -> Optional["Source"]:
        """The record of a stored line; None for anything else (a damaged or newer golden's)."""
        if not isinstance(stored, Mapping) or not isinstance(stored.get("file"), str) or \
                not isinstance(stored.get("line"), int):
            return None
        return cls(stored["file"], stored["line"], str(stored.get("function") or ""), str(stored.get("code") or ""),
                   cls.of(stored.get("caller")))


@dataclass(frozen=True)
class Lines:
    """One tensor's lines on one side: `made` where its op (a variable: the variable) was made;
    `update` the lines that compute a variable's update, in the program's order, the line that
    assigns it last."""

    made: Optional[Source] = None
    update: Tuple[Source, ...] = ()

    def __bool__(self) -> bool:
        return self.made is not None or bool(self.update)

    def to_meta(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {}
        if self.made is not None:
            out["made"] = self.made.to_meta()
        if self.update:
            out["update"] = [s.to_meta() for s in self.update]
        return out

    @classmethod
    def of(cls, stored: Any) -> "Lines":
        if not isinstance(stored, Mapping):
            return cls()
        update = stored.get("update")
        lines = [Source.of(s) for s in update] if isinstance(update, list) else []
        return cls(Source.of(stored.get("made")), tuple(s for s in lines if s is not None))

    def merged(self, other: "Lines") -> "Lines":
        """These lines, with what `other` knows that these do not."""
        return Lines(self.made or other.made, self.update or other.update)


@functools.lru_cache(maxsize=4096)  # a graph's ops share a few hundred files among tens of thousands of frames
def is_user_file(path: str) -> bool:
    """Whether a frame in `path` is the user's code (see LIBRARIES)."""
    if not path or path.startswith("<frozen") or "__autograph_generated_file" in path:
        return False
    full = os.path.abspath(path)
    if full.startswith(_TRACEKIT + os.sep):
        return False
    parts = full.replace("\\", "/").split("/")
    for marker in ("site-packages", "dist-packages"):
        if marker in parts:
            index = len(parts) - 1 - parts[::-1].index(marker)
            package = parts[index + 1] if index + 1 < len(parts) else ""
            package = package[:-3] if package.endswith(".py") else package
            return package not in LIBRARIES and not package.startswith(("tensorflow", "tf_", "_"))
    return not any(full.startswith(root + os.sep) for root in _STDLIB)


def user_source(frames: Iterable[Any], called: bool = False) -> Optional[Source]:
    """The innermost frame of the user's code among `frames` (outermost first, as tracebacks
    list them): (file, line, function, text) tuples (TF1's op.traceback) or objects with
    filename, lineno, name and line (traceback.FrameSummary, TF2's); with the user's frame that
    called it where it is a return statement. `called`: only code tracekit called (a port's
    step, inside a replay): frames outside tracekit's outermost one are the caller's (a test
    driving the replay), and where tracekit calls none (a step it builds) there is no line."""
    frames = list(frames)
    if called:
        outermost = next((i for i, f in enumerate(frames) if _path(f).startswith(_TRACEKIT + os.sep)), None)
        frames = [] if outermost is None else frames[outermost + 1:]
    found: List[Tuple[str, int, str, str]] = []
    for frame in frames:
        try:
            if isinstance(frame, tuple):
                path, line, function, code = (tuple(frame) + ("", "", ""))[:4]
            else:
                path, line, function = frame.filename, frame.lineno, frame.name
                code = getattr(frame, "line", "") or ""
        except (AttributeError, TypeError, ValueError):
            continue
        if isinstance(path, str) and isinstance(line, int) and is_user_file(path):
            found.append((path, line, str(function or ""), str(code or "")))
    if not found:
        return None
    inner = _line(*found[-1])
    if len(found) < 2 or not inner.code.startswith("return "):
        return inner
    # a helper's return (`return tf.reduce_mean(tf.square(pred - target))`): where its value is taken says more
    return Source(inner.file, inner.line, inner.function, inner.code, _line(*found[-2]))


def _path(frame: Any) -> str:
    path = frame[0] if isinstance(frame, tuple) and frame else getattr(frame, "filename", "")
    return os.path.abspath(path) if isinstance(path, str) and path and not path.startswith("<") else ""


def _line(path: str, line: int, function: str, code: str) -> Source:
    start = _statement_start(path, line)
    if start is not None and start < line:  # a call over several lines: the frame is at its last
        text = " ".join("".join(linecache.getline(path, n) for n in range(start, line + 1)).split())
        line = start
    else:
        text = " ".join((code or linecache.getline(path, line) or "").split())
    return Source(_shown(path), line, function, text[:CODE_CHARS])


def _shown(path: str) -> str:
    """A path as kept: relative to the working directory where it is under it (a golden then
    names no home directory of the machine it was recorded on), else as the program ran it."""
    try:
        relative = os.path.relpath(path)
    except ValueError:  # another drive
        return path
    return path if relative.startswith(os.pardir) or os.path.isabs(relative) else relative


@functools.lru_cache(maxsize=64)
def _statement_starts(path: str) -> Tuple[int, ...]:
    """The first lines of the statements in a file (sorted), () where it does not parse."""
    try:
        with open(path, "rb") as handle:
            tree = ast.parse(handle.read(), path)
    except (OSError, SyntaxError, ValueError):
        return ()
    return tuple(sorted({node.lineno for node in ast.walk(tree) if isinstance(node, ast.stmt)}))


def _statement_start(path: str, line: int) -> Optional[int]:
    """The first line of the statement `line` is in: Python puts a frame of a call written over
    several lines at one of its later lines (3.7: the last)."""
    starts = _statement_starts(path)
    index = bisect.bisect_right(starts, line)
    return starts[index - 1] if index else None


def ordered_lines(sources: Sequence[Optional[Source]], limit: int = LINES_KEPT) -> Tuple[Source, ...]:
    """The distinct lines among `sources` (None skipped), first seen first, the last one kept
    where there are more than `limit` (a variable's update ends where it is assigned)."""
    seen: Dict[Tuple[str, int], Source] = {}
    for source in sources:
        if source is not None:
            seen.setdefault((source.file, source.line), source)
    lines = list(seen.values())
    return tuple(lines if len(lines) <= limit else lines[:limit - 1] + lines[-1:])


def read_sources(meta: Any) -> Dict[str, Lines]:
    """{key: Lines} as a trace's metadata keeps them (meta["sources"], or a replay's
    meta["replay"]["sources"]); {} where there are none."""
    if not isinstance(meta, Mapping):
        return {}
    return {key: Lines.of(stored) for key, stored in meta.items() if isinstance(key, str)}


def written(sources: Mapping[str, Lines]) -> Dict[str, Any]:
    return {key: lines.to_meta() for key, lines in sources.items() if lines}


def span(lines: Sequence[Source]) -> str:
    """"optimization.py:80-91" for lines of one file, else the files' lines apart."""
    files: Dict[str, List[int]] = {}
    for source in lines:
        files.setdefault(os.path.basename(source.file), []).append(source.line)
    parts = []
    for name, numbers in files.items():
        low, high = min(numbers), max(numbers)
        parts.append("%s:%d" % (name, low) if low == high else "%s:%d-%d" % (name, low, high))
    return ", ".join(parts)


@dataclass(frozen=True)
class Paired:
    """One tensor's lines on both sides: the TF1 program's (the golden's) and the port's."""

    key: str
    tf1: Lines
    port: Lines


def paired(golden_meta: Any, actual_meta: Any, keys: Mapping[str, str]) -> Dict[str, Paired]:
    """{key: Paired} for those of `keys` (golden key -> the port's key it is read under)
    either trace knows a line of: the golden's from its meta["sources"], the port's from the
    replay's meta["replay"]["sources"]."""
    golden = read_sources(golden_meta.get("sources") if isinstance(golden_meta, Mapping) else None)
    replay = actual_meta.get("replay") if isinstance(actual_meta, Mapping) else None
    port = read_sources(replay.get("sources") if isinstance(replay, Mapping) else None)
    out: Dict[str, Paired] = {}
    for key, port_key in keys.items():
        found = Paired(key, golden.get(key, Lines()), port.get(port_key, Lines()))
        if found.tf1 or found.port:
            out[key] = found
    return out
