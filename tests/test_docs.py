"""The documentation: the site builds with --strict (a broken link, anchor or API reference
fails), and the README stays a landing page whose links resolve."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README_LINES = 250


@pytest.mark.modern  # mkdocs is in the modern environment (tools/requirements/modern.txt)
def test_the_site_builds_strictly(tmp_path):
    ran = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                         cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                         env=dict(os.environ, NO_MKDOCS_2_WARNING="1"))
    assert ran.returncode == 0, ran.stdout[-3000:]
    with open(tmp_path / "site" / "API" / "index.html") as f:
        api = f.read()
    for documented in ("open_trace", "TraceWriter", "Tolerance", "replay", "check", "localize", "calibrate",
                       "TracekitError"):
        assert documented in api, documented  # the reference is made from the docstrings


def test_the_readme_is_a_landing_page_whose_links_resolve():
    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    assert text.count("\n") <= README_LINES, "the README is a landing page: the rest belongs in docs/"
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text)
    local = [link for link in links if not re.match(r"[a-z]+://", link)]
    assert local, "the README links to the documentation"
    missing = [link for link in local if not os.path.exists(os.path.join(ROOT, link))]
    assert not missing, missing
