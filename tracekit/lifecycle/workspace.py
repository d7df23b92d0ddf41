"""The `.tracekit` directory at a project's root: pending actuals and replaced goldens.

    .tracekit/pending/<name>.h5    the actual trace of a replay that differed (or would create a golden)
    .tracekit/pending/<name>.json  what it is: its golden, test, verdict and report (<name>.txt: the report)
    .tracekit/history/<golden path>.<time>.h5   a golden as it was before it was replaced

Golden paths in pending entries are relative to the project root, so an entry made by CI and
downloaded as an artifact resolves in a developer's checkout.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional

from ..store.remote import is_url

DIRNAME = ".tracekit"
IGNORE_ALL = "# Written by tracekit: pending actuals and replaced goldens, local to this checkout.\n*\n"


@dataclass(frozen=True)
class Workspace:
    root: str  # the project root: .tracekit's parent

    @classmethod
    def find(cls, start: Optional[str] = None) -> "Workspace":
        """The nearest directory from `start` (the working directory) upwards that has a
        .tracekit, else `start` itself."""
        here = os.path.abspath(start or os.getcwd())
        probe = here
        while True:
            if os.path.isdir(os.path.join(probe, DIRNAME)):
                return cls(probe)
            parent = os.path.dirname(probe)
            if parent == probe:
                return cls(here)
            probe = parent

    @property
    def path(self) -> str:
        return os.path.join(self.root, DIRNAME)

    @property
    def pending(self) -> str:
        return os.path.join(self.path, "pending")

    @property
    def history(self) -> str:
        return os.path.join(self.path, "history")

    def ensure(self, sub: str) -> str:
        """Create .tracekit/<sub> (and a .gitignore that keeps .tracekit out of version control,
        as pytest does for its cache); returns its path."""
        os.makedirs(self.path, exist_ok=True)
        ignore = os.path.join(self.path, ".gitignore")
        if not os.path.exists(ignore):
            with open(ignore, "w") as fh:
                fh.write(IGNORE_ALL)
        directory = os.path.join(self.path, sub)
        os.makedirs(directory, exist_ok=True)
        return directory

    def relative(self, path: str) -> str:
        """`path` relative to the root when it lies inside it (as pending entries store it); a URL as it is."""
        if is_url(path):
            return path
        absolute = os.path.abspath(path)
        rel = os.path.relpath(absolute, self.root)
        return absolute if rel.startswith(os.pardir) else rel.replace(os.sep, "/")

    def resolve(self, path: str) -> str:
        return path if os.path.isabs(path) or is_url(path) else os.path.normpath(os.path.join(self.root, path))

    def lock_dir(self, golden: str) -> str:
        """The folder whose lock guards `golden` and its pending entries: its own folder, or for a
        golden at a URL (read-only: no writer to keep out) the pending folder."""
        return self.pending if is_url(golden) else os.path.dirname(self.resolve(golden))
