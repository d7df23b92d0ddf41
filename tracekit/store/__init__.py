"""The golden trace store: one HDF5 file per trace (format in docs/FORMAT.md).

Write with `create(path)` (a TraceWriter), read with `open_trace(path)` (a Trace),
check with `verify(path)`, finish what a killed writer left with `recover(path)`.
Runs on Python 3.7 / h5py 2.10 (the legacy recorder writes through it) and on
Python 3.11 / h5py 3.

The public modules are writer, reader, catalog, values (what can be stored), digest
(what a step between keyframes keeps of a tensor), remote (goldens at URLs), verify,
recover, export, provenance (where a golden's data came from) and audit (does a step hold
what its optimizer's update ops compute; its verdicts are audit_result, the TF1 rules
update_rules); modules named with a leading underscore (the file layout, the journal and its
records, the codec, the HDF5 writing, the two reading backends) are the store's own and may
change without notice.
"""

from __future__ import annotations

from ..keys import Kind
from .audit import audit_step, audit_trace
from .audit_result import AuditResult, StepAudit, VariableAudit
from .catalog import TensorInfo
from ._format import FORMAT_VERSION, journal_path
from .opening import open_trace
from .reader import Series, Step, Trace
from .recover import RecoverResult, recover
from .verify import VerifyResult, verify
from .writer import TraceWriter, create

__all__ = [
    "AuditResult",
    "FORMAT_VERSION",
    "Kind",
    "RecoverResult",
    "Series",
    "Step",
    "StepAudit",
    "TensorInfo",
    "Trace",
    "TraceWriter",
    "VariableAudit",
    "VerifyResult",
    "audit_step",
    "audit_trace",
    "create",
    "journal_path",
    "open_trace",
    "recover",
    "verify",
]
