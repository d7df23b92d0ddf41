"""The HTML report as a user sees it: one self-contained page, byte-stable, rendered by a real
browser (headless Chromium) with its plots drawn; without matplotlib, a clear message."""

from __future__ import annotations

import base64
import io
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

import tracekit
from tracekit.cli import main
from tracekit.errors import MissingDependency
from tracekit._ci import in_ci

from ..comparison.test_compare import write

pytestmark = pytest.mark.modern  # matplotlib is in the modern environment only
plt = pytest.importorskip("matplotlib.pyplot", reason="the HTML report needs matplotlib (tracekit[report])")
from PIL import Image  # noqa: E402  # matplotlib's own dependency

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


@pytest.fixture
def pair(tmp_path):
    """A golden and a replay whose layer2 tap goes wrong at step 2 (and stays wrong)."""
    golden = write(str(tmp_path / "golden.h5"), steps=12)

    def change(step, key, value):
        if key == "tap/layer2" and step >= 2:
            return value * np.float32(1.01) + np.float32(1e-3)
        if key == "loss/loss" and step >= 2:
            return value + np.float32(0.01 * step)
        return value
    return golden, write(str(tmp_path / "actual.h5"), change=change, steps=12)


def _images(page):
    """The page's inline PNGs, decoded."""
    return [Image.open(io.BytesIO(base64.b64decode(data)))
            for data in re.findall(r'src="data:image/png;base64,([^"]+)"', page)]


def test_the_page_is_self_contained_complete_and_byte_stable(pair, tmp_path):
    golden, actual = pair
    result = tracekit.compare(golden, actual)
    path = result.write_html(str(tmp_path / "report.html"))
    page = open(path, encoding="utf-8").read()
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert not re.search(r'(src|href)="(https?:)?//', page) and "<link" not in page  # nothing fetched
    assert '<span class="verdict MISMATCH">MISMATCH</span> step 2, tap/layer2' in page
    assert "First divergence: step 2, tap/layer2 (taps)" in page and "at [" in page  # values at the worst index
    assert page.count("<svg") == 5  # loss and lr overlays, abs and rel error per kind, error vs magnitude
    assert "loss/loss" not in page or "loss (golden)" in page
    images = _images(page)
    assert len(images) == 1 and images[0].size[0] > 300 and np.asarray(images[0]).std() > 10  # the heatmap
    assert page.count('<tr class="fail">') == 2 and page.count("<tr class=") == len(result.tensors)
    again = result.write_html(str(tmp_path / "again.html"))
    assert open(again, "rb").read() == open(path, "rb").read()
    assert not os.path.exists(path + ".partial")


def test_a_match_and_a_replay_without_its_trace_still_render(pair, tmp_path):
    golden, _ = pair
    match = tracekit.compare(golden, golden)
    page = open(match.write_html(str(tmp_path / "m.html")), encoding="utf-8").read()
    assert '<span class="verdict MATCH">MATCH</span>' in page and "First divergence" not in page
    assert "no error at any step" in page
    match.actual = str(tmp_path / "never-written.h5")  # as a check that was not saved
    page = open(match.write_html(str(tmp_path / "n.html")), encoding="utf-8").read()
    assert "the actual trace was not at hand" in page


def test_the_cli_writes_the_page_and_exits_as_diff(pair, tmp_path, capsys):
    golden, actual = pair
    out = str(tmp_path / "r.html")
    assert main(["report", golden, actual, "-o", out]) == 1
    assert capsys.readouterr().out.startswith("wrote %s: MISMATCH" % out) and os.path.getsize(out) > 10000
    assert main(["report", golden, golden, "-o", out, "--exact"]) == 0


def test_without_matplotlib_it_says_how_to_install_it(pair, tmp_path, monkeypatch, capsys):
    golden, actual = pair
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    with pytest.raises(MissingDependency, match=r"pip install 'tracekit\[report\]'"):
        tracekit.compare(golden, actual).write_html(str(tmp_path / "r.html"))
    assert main(["report", golden, actual, "-o", str(tmp_path / "r.html")]) == 2
    assert "tracekit[report]" in capsys.readouterr().err and not os.path.exists(str(tmp_path / "r.html"))
    assert main(["diff", golden, actual]) == 1  # the text report needs nothing more


def _screenshot(page_path, png_path, height=2600):
    proc = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           "--window-size=1280,%d" % height, "--screenshot=%s" % png_path, "file://" + page_path],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    assert proc.returncode == 0 and os.path.exists(png_path), proc.stderr.decode(errors="replace")[-2000:]
    return np.asarray(Image.open(png_path).convert("RGB")).astype(np.int16)


def _has_color(pixels, hex_color, tolerance=40, at_least=30):
    rgb = np.array([int(hex_color[i:i + 2], 16) for i in (1, 3, 5)])
    return int((np.abs(pixels - rgb).sum(axis=-1) <= tolerance).sum()) >= at_least


@pytest.mark.skipif(CHROMIUM is None and not in_ci(),
                    reason="no Chromium here to render the page (tools/bootstrap installs Debian's chromium where "
                           "it can: apt-get install chromium)")
def test_chromium_renders_the_page_with_its_plots(pair, tmp_path):
    assert CHROMIUM is not None, "CI must render the report: tools/bootstrap installs chromium"
    golden, actual = pair
    page = tracekit.compare(golden, actual).write_html(str(tmp_path / "report.html"))
    pixels = _screenshot(page, str(tmp_path / "shot.png"))
    assert pixels.shape == (2600, 1280, 3)
    # Bands of 100 rows: the page has drawn content down most of its length, not a blank or an error page.
    drawn = [band.std() > 8 for band in np.array_split(pixels, 26)]
    assert sum(drawn) >= 15, drawn
    # The plots' own colours are on screen: golden and actual curves, the verdict badge, the heatmap's dark end.
    for color in ("#1f77b4", "#d62728", "#c62828", "#2ca02c"):
        assert _has_color(pixels, color), color
    assert _has_color(pixels, "#000004", tolerance=60, at_least=5) or _has_color(pixels, "#3b0f70", 60, 5)
    # The script ran and the DOM holds the figures (a broken page would not).
    dom = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", "file://" + page],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120).stdout.decode()
    assert dom.count("<svg") == 5 and "<img" in dom and "Traceback" not in dom


def test_a_shipped_golden_against_the_other_machines(tmp_path):
    # Real goldens: the same program on two CPUs, compared bit for bit (a round-off mismatch).
    from ..support import FOREIGN_GOLDENS, golden

    result = tracekit.compare(os.path.join(FOREIGN_GOLDENS, "seed_example.h5"), golden("seed_example"),
                              tracekit.Tolerance.exact())
    page = open(result.write_html(str(tmp_path / "seed.html")), encoding="utf-8").read()
    assert "MISMATCH" in page and "likely cause: the machine, not the code" in page
    assert page.count("<svg") == 5 and len(_images(page)) == 1
    assert page.count("<tr class=") == len(result.tensors) == 20
