"""Text for environments: a one-line summary of a machine, the lines of an environment
diff, and a whole fingerprint (`tracekit env`)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

from ..comparison.envdiff import Change, EnvironmentDiff, numerics
from .text import nested_lines

# The widest vector extension decides most kernels' code path; shown first.
ISA_TIERS = [("amx_tile", "AMX"), ("avx512_fp16", "AVX-512 FP16"), ("avx512_bf16", "AVX-512 BF16"),
             ("avx512_vnni", "AVX-512 VNNI"), ("avx512f", "AVX-512"), ("avx_vnni", "AVX-VNNI"), ("avx2", "AVX2"),
             ("avx", "AVX"), ("sse4_2", "SSE4.2"), ("sve2", "SVE2"), ("sve", "SVE"), ("asimd", "NEON")]


def isa_summary(isa: Optional[Sequence[str]]) -> str:
    """The widest extension, like "AVX-512 BF16 +FMA" or "AVX2 +FMA"; "ISA unknown" when
    the trace did not record its instruction sets."""
    if isa is None or not isinstance(isa, (tuple, list)):
        return "ISA unknown"
    flags = set(isa)
    top = next((label for flag, label in ISA_TIERS if flag in flags), "no SIMD extensions")
    return top + (" +FMA" if "fma" in flags else "")


def _pairs(template: str) -> Any:
    return lambda value: ", ".join(template % tuple(pair) for pair in value) if value else "none"


# How a field's value reads; others: on/off for booleans, lists joined by spaces.
FORMATS = {
    "cpu caches": _pairs("%s %s"),
    "numerics variables": _pairs("%s=%s"),
    "GPUs": _pairs("%s (compute capability %s)"),
    "CUDA, cuDNN": lambda value: "CUDA %s, cuDNN %s" % tuple(value),
}


def value_text(field: str, value: Any) -> str:
    if value is None:
        return "not recorded"
    if isinstance(value, (tuple, list)) and field in FORMATS:
        return FORMATS[field](value)
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, (tuple, list)):
        return " ".join(str(v) for v in value) if value else "none"
    return str(value)


def summary(side: Dict[str, Any]) -> str:
    """One side of an environment diff (envdiff.numerics) in a line."""
    framework = side.get("framework") or "TensorFlow %s" % value_text("tensorflow", side.get("tensorflow"))
    parts = [framework, str(side.get("cpu") or "unknown CPU"), isa_summary(side.get("cpu instruction sets"))]
    onednn = side.get("oneDNN")
    if onednn is not None:
        cap = side.get("oneDNN ISA cap")
        parts.append("oneDNN %s%s" % (value_text("oneDNN", onednn),
                                      " (ISA cap %s)" % cap if cap not in (None, "none") else ""))
    threads = side.get("intra-op threads")
    if threads is not None:
        parts.append("%s threads" % threads)
    gpus = side.get("GPUs")
    if gpus:
        parts.append("GPU " + value_text("GPUs", gpus))
    if side.get("keras"):
        parts.append("Keras: %s" % side["keras"])
    return ", ".join(parts)


def change(c: Change) -> str:
    if c.field == "cpu instruction sets" and isinstance(c.golden, tuple) and isinstance(c.actual, tuple):
        golden_only = sorted(set(c.golden) - set(c.actual))
        actual_only = sorted(set(c.actual) - set(c.golden))
        detail = "; ".join(part for part in [
            "golden only: " + " ".join(golden_only) if golden_only else "",
            "actual only: " + " ".join(actual_only) if actual_only else ""] if part)
        return "%s: %s -> %s (%s)" % (c.field, isa_summary(c.golden), isa_summary(c.actual), detail)
    return "%s: %s -> %s" % (c.field, value_text(c.field, c.golden), value_text(c.field, c.actual))


def changes(items: Sequence[Change]) -> str:
    """Known differences one by one; fields a trace did not record, grouped."""
    known = [change(c) for c in items if not c.unknown]
    sides: Dict[str, List[str]] = {}
    for c in items:
        if c.unknown:
            side = "either trace" if c.golden is None and c.actual is None else \
                "the golden" if c.golden is None else "the actual"
            sides.setdefault(side, []).append(c.field)
    known += ["not recorded by %s (a trace from an older tracekit?): %s" % (side, ", ".join(fields))
              for side, fields in sorted(sides.items())]
    return "; ".join(known)


def diff_lines(diff: EnvironmentDiff) -> List[str]:
    """What differs, kernel-selecting fields first; the report's environment section."""
    lines = ["golden recorded on %s" % summary(diff.golden), "actual ran on      %s" % summary(diff.actual)]
    kernels = diff.kernel_changes
    if not diff.changes:
        lines.append("environments: nothing that selects kernels differs")
        return lines
    if kernels:
        verb = "may differ" if all(c.unknown for c in kernels) else "differs"
        lines.append("%s, selecting other kernels (last bits differ): %s" % (verb, changes(kernels)))
    else:
        lines.append("nothing that selects kernels differs")
    others = [c for c in diff.changes if not c.kernels]
    if others:
        lines.append("differs, not affecting kernels: " + changes(others))
    return lines


def fingerprint_text(meta: Dict[str, Any]) -> str:
    """`tracekit env`: the summary line, then every field."""
    lines = ["machine   %s" % summary(numerics(meta))]
    nested_lines("", meta, lines)
    return "\n".join(lines)
