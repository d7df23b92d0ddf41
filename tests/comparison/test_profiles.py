"""The tolerance profiles: one registry, one reading of what users write, and the help texts
and docs that list the profiles kept to the registry."""

from __future__ import annotations

import os
import pathlib
import re

import pytest

import tracekit
from tracekit.cli import build_parser
from tracekit.comparison.profiles import AUTO, PROFILES, profile, profile_names, resolve_tolerance

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_what_users_write_resolves_once(tmp_path):
    given = tracekit.Tolerance(atol=1.0)
    assert resolve_tolerance(given, str(tmp_path)) is given
    assert resolve_tolerance(None, str(tmp_path)) is None and resolve_tolerance(AUTO, str(tmp_path)) is None
    for name in profile_names():  # kept by name: the comparison reports the profile it used
        assert resolve_tolerance(name, str(tmp_path)) == name
        assert isinstance(profile(name), tracekit.Tolerance)
    (tmp_path / "policy.toml").write_text("atol = 0.5\n")
    assert resolve_tolerance("policy.toml", str(tmp_path)).atol == 0.5  # relative to the root given
    assert resolve_tolerance(pathlib.Path(tmp_path / "policy.toml"), "/elsewhere").atol == 0.5
    for bad in ("nonsense", 3, ["exact"]):
        with pytest.raises(tracekit.UsageError, match="give a Tolerance, a TOML file, or one of auto, default, exact"):
            resolve_tolerance(bad, str(tmp_path))
    with pytest.raises(tracekit.UsageError, match="unknown tolerance profile 'loose'; use default, exact, gpu"):
        profile("loose")


def test_help_and_docs_list_every_profile():
    names = set(profile_names())
    assert names == set(PROFILES)
    diff = build_parser()._subparsers._group_actions[0].choices["diff"]  # argparse keeps no public map
    choices = next(a.choices for a in diff._actions if a.dest == "profile")
    assert set(choices) == names | {AUTO}
    with open(os.path.join(ROOT, "docs", "GOLDENS.md")) as f:
        text = f.read()
    block = text[text.index("| profile | what it is for |"):].split("\n\n")[0]  # the table, to its blank line
    table = {m.group(1): m.group(2) for m in re.finditer(r"^\s*\| `([a-z-]+)` \| (.*?) \|$", block, re.M)}
    assert set(table) == names, "docs/GOLDENS.md's profile table differs from comparison/profiles.py"
    for name, spec in PROFILES.items():  # the table says what the registry says (links aside)
        assert table[name].replace("`", "").startswith(spec.summary.split(":")[0]), name
