from __future__ import annotations

import sys

# The HTML report's plots need matplotlib, which only the modern environment has: the legacy
# run does not collect its test, rather than skip it (a modern one without matplotlib skips, saying why).
collect_ignore = ["test_html.py"] if sys.version_info < (3, 8) else []
