"""Tolerance policies: how close a replayed tensor must be to the golden one.

`Tolerance(atol, rtol, equal_nan, ulps)` is elementwise closeness, numpy's rule with the
golden as reference, plus an allowance in units of round-off:
|actual - golden| <= atol + rtol * |golden| + ulps * eps * S, where eps is the dtype's
machine epsilon (2**-23 for float32) and S the tensor's largest |golden| at that step:
kernels that sum in another order differ in proportion to the magnitudes they sum, not
to each element (docs/NUMERICS.md). Rules refine it
by kind, name pattern and step range; for each setting the last matching rule
that gives it wins, then the Tolerance's own value, then the default: inputs and
random draws exact, the learning rate rtol=1e-6, else by dtype (float32 the
guide's atol=1e-5 rtol=1e-6; float16/bfloat16 looser), and where a tensor is a sum (taps,
losses, fetches, gradients) REDUCTION_ULPS of its scale, unless atol, rtol or ulps is set for
it: another machine's kernels sum in another order. Integers, booleans and strings compare
exactly. A NaN or Inf on one side only is always a mismatch; NaN on both sides in
the same places passes only with equal_nan.

The migration guide's policy (loss atol=1e-5 for the first 10 steps, then rtol=0.05), Tolerance.guide():

    Tolerance().rule(kind="loss", steps=(0, 10), atol=1e-5, rtol=0) \\
               .rule(kind="loss", steps=(10,), atol=0, rtol=0.05)
"""

from __future__ import annotations

import fnmatch
import json
import math
import numbers
import re
from dataclasses import dataclass, field, replace
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from ..errors import UsageError
from ..keys import INITIAL_STEP, Kind

# (atol, rtol) when nothing else says: float32 is the guide's forward-pass tolerance.
DTYPE_DEFAULTS = {
    "float64": (1e-8, 1e-7),
    "float32": (1e-5, 1e-6),
    "float16": (1e-3, 1e-3),
    "bfloat16": (1e-2, 1e-2),
    "complex128": (1e-8, 1e-7),
    "complex64": (1e-5, 1e-6),
}
EXACT = (0.0, 0.0)
# Machine epsilon by dtype name: the unit of `ulps`.
EPSILON = {"float64": 2.0 ** -52, "complex128": 2.0 ** -52, "float32": 2.0 ** -23, "complex64": 2.0 ** -23,
           "float16": 2.0 ** -10, "bfloat16": 2.0 ** -7}
# The cross-machine round-off bound, in eps * S per kind (derived in docs/NUMERICS.md): the same
# code on another CPU, thread count or oneDNN setting sums in another order. Forward values
# (one reduction of up to 2**12 terms: sqrt(n) * u, twice for safety) get 64; gradients,
# and the variables and slots they update, pass through forward and backward reductions and
# cancel over the batch: 8x more. Inputs and random draws are fed or drawn exactly.
ROUNDOFF_ULPS = {"tap": 64.0, "loss": 64.0, "lr": 64.0, "fetch": 64.0, "grad": 512.0, "var": 512.0, "slot": 512.0}
# A port's own noise after its first step, in eps * S per kind, allowed by Tolerance.training():
# 4x the largest error of the shipped correct ports over every step (TF 1.15 -> TF 2.21, six
# ports: taps 77, losses 49, gradients 283, variables 248, optimizer slots 448;
# tools/replay_examples.py measures them), rounded up to a power of two, forward kinds and the
# update chain each sharing one bound. Step 0 gets none: one step of a port matches at the
# guide's tolerance, and most porting mistakes show there (docs/NUMERICS.md).
TRAINING_ULPS = {"tap": 512.0, "loss": 512.0, "fetch": 512.0, "grad": 2048.0, "var": 2048.0, "slot": 2048.0}
# A port under Keras mixed precision (mixed_float16: float16 activations and gradients, float32
# variables) against a float32 golden, at step 0, in float32 eps * the tensor's scale: 4x the
# largest error of the estimator example's port under mixed_float16 (random 2048 (half a
# float16 ulp: a draw rounded to float16), taps 5.6e3, loss 3.2e3, gradients 1.5e4, variables
# 1.8e3, Adam's slots 3.0e4), rounded up to a power of two. Later steps drift apart (a rounded
# dropout draw can flip a mask element): only the loss is held, to the guide's long-run rtol=0.05.
MIXED_PRECISION_ULPS = {"random": 4096.0, "tap": 32768.0, "loss": 32768.0, "fetch": 32768.0, "grad": 65536.0,
                        "var": 8192.0, "slot": 131072.0}
# TensorFloat-32 matmuls and convolutions round their inputs to 10 mantissa bits (2**-11
# relative): 4x that, in float32 eps * the tensor's scale. Derived, not measured on a GPU here.
TF32_ULPS = {"tap": 16384.0, "loss": 16384.0, "fetch": 16384.0, "grad": 16384.0, "var": 16384.0, "slot": 16384.0}
# What the default tolerance allows a sum for being summed in another order, in eps * the tensor's
# scale: sqrt(n) * u for a reduction of n <= 2**10 terms (a random walk of n roundings of half an
# ulp), the order another machine's kernels (or TF 2's against TF 1's) take. Measured: a canned
# Wide & Deep's gradient summed over 512 rows, 2.4 ulps between TF 1.15 on AVX-512 and TF 2.21 with
# oneDNN capped at AVX2 on one thread (docs/NUMERICS.md). Variables and slots get none: an update
# that carries its inputs' round-off further is verified by its own rule (comparison/carried.py),
# and a port's update slips (Adam's epsilon) show in a few ulps of them.
REDUCTION_ULPS = {"tap": 16.0, "loss": 16.0, "fetch": 16.0, "grad": 16.0}
# Per kind, before dtype defaults: inputs and random draws are fed as recorded; a learning
# rate is small, so only a relative bound says anything about it.
KIND_DEFAULTS = {"input": EXACT, "random": EXACT, "lr": (0.0, 1e-6)}
# `moments` bounds a digest's sums and norm as a whole (comparison/digests.py), in eps x their own
# scale: what the drift envelope measured them to move. Unset, only the elementwise rule bounds them.
FIELDS = ("atol", "rtol", "equal_nan", "ignore", "ulps", "moments")


def literal(name: str) -> str:
    """A rule's name pattern matching exactly `name`, glob characters and all."""
    if not name.startswith("re:") and not any(c in name for c in "*?["):
        return name
    return "re:%s\\Z" % re.escape(name)


class Rule:
    """Settings for the tensors a rule matches: kind, name (a glob, or "re:<regex>") and
    steps (start, stop) with stop exclusive and None open."""

    __slots__ = ("kind", "name", "steps", "settings", "_regex", "exact_name")

    def __init__(self, kind: Optional[str] = None, name: Optional[str] = None,
                 steps: Optional[Tuple[Optional[int], Optional[int]]] = None, **settings: Any) -> None:
        unknown = set(settings) - set(FIELDS)
        if unknown:
            raise UsageError("unknown tolerance setting(s) %s; use %s" % (", ".join(sorted(unknown)), ", ".join(FIELDS)))
        self.kind = None if kind is None else Kind.parse(kind).value
        self.name = name
        if steps is not None:
            steps = tuple(steps)
            if len(steps) == 1:  # [start]: from start on (TOML has no null for an open stop)
                steps = (steps[0], None)
            if len(steps) != 2:
                raise UsageError("steps must be (start, stop) or (start,), got %r" % (steps,))
        self.steps = steps
        self.settings = {k: v for k, v in settings.items() if v is not None}
        # a name with no pattern in it matches itself alone: Tolerance indexes those rules by it
        self.exact_name = name if name is not None and literal(name) == name else None
        pattern = name[3:] if name is not None and name.startswith("re:") else \
            (fnmatch.translate(name) if name is not None else None)
        try:
            self._regex = None if pattern is None else re.compile(pattern)
        except re.error as exc:
            raise UsageError("bad name pattern %r: %s" % (name, exc)) from None

    def matches(self, kind: str, name: str, step: int) -> bool:
        return self.matches_tensor(kind, name) and self.at(step)

    def matches_tensor(self, kind: str, name: str) -> bool:
        """Whether the rule holds for the tensor at some step."""
        if self.kind is not None and kind != self.kind:
            return False
        return self._regex is None or self._regex.match(name) is not None

    def at(self, step: int) -> bool:
        if self.steps is not None:
            start, stop = self.steps
            if (start is not None and step < start) or (stop is not None and step >= stop):
                return False
        return True

    def __repr__(self) -> str:
        return "Rule(%s)" % ", ".join("%s=%r" % kv for kv in self.to_dict().items())

    def to_dict(self) -> Dict[str, Any]:
        out = {"kind": self.kind, "name": self.name, "steps": None if self.steps is None else list(self.steps)}
        out.update(self.settings)
        return {k: v for k, v in out.items() if v is not None}


@dataclass
class Resolved:
    """The tolerance for one tensor at one step."""

    atol: float
    rtol: float
    equal_nan: bool
    ignore: bool
    exact: bool
    ulps: float = 0.0
    eps: float = EPSILON["float32"]
    moments: float = math.inf  # a digest's sums and norm, in eps x their scale (FIELDS)


@dataclass
class Tolerance:
    """Global atol/rtol/ulps (None: the per-kind and per-dtype defaults) and rules, later
    rules winning, for the tensors they match. `accept_noise`: failures that amplified
    round-off explains (comparison/noise.py) pass; they are still listed."""

    atol: Optional[float] = None
    rtol: Optional[float] = None
    equal_nan: bool = False
    rules: List[Rule] = field(default_factory=list)
    ulps: Optional[float] = None
    accept_noise: bool = False
    _index: "_RuleIndex" = field(default_factory=lambda: _RuleIndex(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.equal_nan = bool(self.equal_nan)
        self.accept_noise = bool(self.accept_noise)
        self.rules = list(self.rules)

    def rule(self, kind: Optional[str] = None, name: Optional[str] = None,
             steps: Optional[Tuple[Optional[int], Optional[int]]] = None, **settings: Any) -> "Tolerance":
        """A new Tolerance with one more rule (later rules win)."""
        return replace(self, rules=self.rules + [Rule(kind, name, steps, **settings)])

    def resolve(self, kind: str, name: str, step: int, dtype: str) -> Resolved:
        found: Dict[str, Any] = {}
        for rule in self._index.latest_first(self.rules, kind, name):
            if rule.at(step):
                for key, value in rule.settings.items():
                    found.setdefault(key, value)
        exact = dtype not in DTYPE_DEFAULTS
        default_atol, default_rtol = EXACT if exact else KIND_DEFAULTS.get(kind, DTYPE_DEFAULTS[dtype])
        atol = found.get("atol", self.atol if self.atol is not None else default_atol)
        rtol = found.get("rtol", self.rtol if self.rtol is not None else default_rtol)
        unset = not ({"atol", "rtol", "ulps"} & set(found)) and self.atol is None and self.rtol is None
        default_ulps = REDUCTION_ULPS.get(kind, 0.0) if unset and not exact else 0.0
        ulps = found.get("ulps", self.ulps if self.ulps is not None else default_ulps)
        return Resolved(float(atol), float(rtol), bool(found.get("equal_nan", self.equal_nan)),
                        bool(found.get("ignore", False)), exact, float(ulps), EPSILON.get(dtype, EPSILON["float32"]),
                        float(found.get("moments", math.inf)))

    def to_dict(self) -> Dict[str, Any]:
        return {"atol": self.atol, "rtol": self.rtol, "equal_nan": self.equal_nan, "ulps": self.ulps,
                "accept_noise": self.accept_noise, "rules": [r.to_dict() for r in self.rules]}

    def to_toml(self) -> str:
        """The policy as a TOML file `load` reads back (the CLI's --tolerance)."""
        # TOML has no null: an unset setting is left out (a zero is written: atol = 0 is exact)
        settings = {k: v for k, v in self.to_dict().items() if k != "rules" and v is not None and v is not False}
        out = ["%s = %s" % (key, _toml(value)) for key, value in settings.items()]
        for rule in self.rules:
            written = rule.to_dict()
            if rule.steps is not None:
                start, stop = rule.steps
                if start is None and stop is None:
                    del written["steps"]  # every step
                else:  # an open start is the initial state on; an open stop is [start] alone
                    written["steps"] = [INITIAL_STEP if start is None else start] + ([] if stop is None else [stop])
            out += ["", "[[rule]]"] + ["%s = %s" % (key, _toml(value)) for key, value in written.items()]
        return "\n".join(out) + "\n"

    @classmethod
    def from_dict(cls, data: Dict[str, Any], source: str = "tolerance") -> "Tolerance":
        """From a mapping like a TOML file's: atol, rtol, equal_nan, ulps, accept_noise, and
        [[rule]] tables."""
        allowed = {"atol", "rtol", "equal_nan", "ulps", "accept_noise", "rule", "rules"}
        unknown = set(data) - allowed
        if unknown:
            raise UsageError("%s: unknown key(s) %s; use %s" % (source, ", ".join(sorted(unknown)),
                                                                ", ".join(sorted(allowed))))
        rules = []
        for i, item in enumerate(list(data.get("rule", [])) + list(data.get("rules", []))):
            if not isinstance(item, dict):
                raise UsageError("%s: rule %d must be a table" % (source, i + 1))
            item = dict(item)
            try:
                rules.append(Rule(item.pop("kind", None), item.pop("name", None), item.pop("steps", None), **item))
            except UsageError as exc:
                raise UsageError("%s: rule %d: %s" % (source, i + 1, exc)) from None
        return cls(data.get("atol"), data.get("rtol"), data.get("equal_nan", False), rules, data.get("ulps"),
                   data.get("accept_noise", False))

    @classmethod
    def guide(cls) -> "Tolerance":
        """The migration guide's policy for long runs: loss atol=1e-5 for 10 steps, then rtol=0.05."""
        return cls().rule(kind="loss", steps=(0, 10), atol=1e-5, rtol=0).rule(kind="loss", steps=(10,), atol=0,
                                                                              rtol=0.05)

    @classmethod
    def training(cls, accept_noise: bool = True) -> "Tolerance":
        """Multi-step training comparisons of a port: step 0 at the default tolerance, later
        steps also allowing TRAINING_ULPS (float32 round-off that Adam, batch norm and long
        sums amplify from step to step), in eps * the tensor's scale; and failures that
        amplified round-off explains accepted (a bias before batch norm under Adam)."""
        tolerance = cls(accept_noise=accept_noise)
        for kind, ulps in sorted(TRAINING_ULPS.items()):
            tolerance = tolerance.rule(kind=kind, steps=(1, None), ulps=ulps)
        return tolerance

    @classmethod
    def mixed_precision(cls) -> "Tolerance":
        """A port under mixed_float16 against a float32 golden: step 0 at float16 precision
        (MIXED_PRECISION_ULPS); later steps the loss only, at the guide's rtol=0.05. A port that
        still computes in float32 passes too: this only widens."""
        tolerance = cls()
        for kind, ulps in sorted(MIXED_PRECISION_ULPS.items()):
            tolerance = tolerance.rule(kind=kind, steps=(0, 1), ulps=ulps)
        for kind in ("random", "tap", "fetch", "grad", "var", "slot"):
            tolerance = tolerance.rule(kind=kind, steps=(1, None), ignore=True)
        return tolerance.rule(kind="loss", steps=(1, None), atol=0, rtol=0.05)

    @classmethod
    def gpu(cls, tf32: bool = False) -> "Tolerance":
        """A port on a GPU against a CPU golden: the training profile, plus at step 0 the
        cross-machine round-off bound (GPU kernels sum in their own order); with TensorFloat-32
        on, TF32_ULPS at every step."""
        tolerance = cls.training()
        for kind, ulps in sorted(ROUNDOFF_ULPS.items()):
            tolerance = tolerance.rule(kind=kind, steps=(0, 1), ulps=ulps)
        for kind, ulps in sorted(TF32_ULPS.items()) if tf32 else []:
            tolerance = tolerance.rule(kind=kind, ulps=ulps)
        return tolerance

    @classmethod
    def exact(cls) -> "Tolerance":
        """Bit for bit (NaN equal to NaN): two runs on the same machine and software."""
        return cls(atol=0, rtol=0, equal_nan=True, ulps=0)

    @classmethod
    def roundoff(cls) -> "Tolerance":
        """The cross-machine bound: the same code on a machine whose kernels sum in another
        order (ROUNDOFF_ULPS per kind, in eps * the tensor's scale); exact elsewhere."""
        tolerance = cls.exact()
        for kind, ulps in sorted(ROUNDOFF_ULPS.items()):
            tolerance = tolerance.rule(kind=kind, ulps=ulps)
        return tolerance

    @classmethod
    def load(cls, path: str) -> "Tolerance":
        """Read a TOML tolerance file (tomllib; tomli before Python 3.11, the legacy side)."""
        try:
            import tomllib
        except ImportError:  # Python < 3.11: tomli is tomllib's original, a dependency there
            try:
                import tomli as tomllib
            except ImportError:
                raise UsageError("reading %s needs tomli before Python 3.11: pip install tomli" % path) from None
        try:
            with open(path, "rb") as fh:
                data = tomllib.load(fh)
        except OSError as exc:
            raise UsageError("cannot read tolerance file %s: %s" % (path, exc.strerror or exc)) from None
        except tomllib.TOMLDecodeError as exc:
            raise UsageError("tolerance file %s is not valid TOML: %s" % (path, exc)) from None
        return cls.from_dict(data, source=path)


def _toml(value: Any) -> str:
    """A TOML value: booleans, finite numbers (numpy's too), strings and lists."""
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        if not math.isfinite(value):
            raise UsageError("a tolerance setting of %r cannot be written to TOML" % (value,))
        return repr(float(value))
    if isinstance(value, str):
        # JSON's escapes are TOML's; TOML also wants DEL escaped, and takes other characters as UTF-8
        return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")
    return "[%s]" % ", ".join(_toml(v) for v in value)


class _RuleIndex:
    """Which rules may match a tensor, latest first, found once per tensor: resolve runs for every
    tensor at every step, and a drift envelope's tolerance holds a rule per tensor and band
    (thousands at a real model's size), most of them naming one tensor exactly. Rules are added
    by Tolerance.rule (a new list); a list appended to or shortened in place is indexed again."""

    def __init__(self) -> None:
        # (the rules list indexed, its length, exact name -> rule positions, positions of the rest, found per
        # tensor): replaced whole, so that a comparison's threads never read one half made
        self._built: Tuple[Any, int, Dict[str, List[int]], List[int], Dict[Tuple[str, str], List[Rule]]] = \
            (None, 0, {}, [], {})

    def latest_first(self, rules: List[Rule], kind: str, name: str) -> List[Rule]:
        built = self._built
        if built[0] is not rules or built[1] != len(rules):
            named: Dict[str, List[int]] = {}
            patterns: List[int] = []
            for position, rule in enumerate(rules):
                if rule.exact_name is None:
                    patterns.append(position)
                else:
                    named.setdefault(rule.exact_name, []).append(position)
            built = self._built = (rules, len(rules), named, patterns, {})
        _, _, named, patterns, found = built
        matching = found.get((kind, name))
        if matching is None:
            positions = sorted(named.get(name, []) + patterns, reverse=True)
            matching = found[(kind, name)] = [rules[p] for p in positions if rules[p].matches_tensor(kind, name)]
        return matching
