"""The HTML report of a wrong port, and its screenshot for the documentation (docs/REPORTS.md).

Replays the Estimator model's port with Keras Adam's default epsilon (1e-7, where TF1's
AdamOptimizer used 1e-8) against goldens/estimator_model.h5, writes the comparison as HTML
(`tracekit report`'s page) and, where Chromium is installed, a screenshot of its top:

    .venv/bin/python tools/report_example.py [--out build/report-example]
        [--screenshot docs/images/report-wrong-port.png]
"""

import argparse
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

import tracekit  # noqa: E402
import tracekit.tf2  # noqa: E402
from tools.ports import estimator_model  # noqa: E402


def screenshot(page: str, png: str, width: int = 1200, height: int = 1750) -> None:
    """The page's top `height` pixels, as headless Chromium draws it."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if browser is None:
        raise SystemExit("report_example: no Chromium to take the screenshot (apt-get install chromium); "
                         "the page is at %s" % page)
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    "--window-size=%d,%d" % (width, height), "--screenshot=%s" % os.path.abspath(png),
                    "file://" + os.path.abspath(page)], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=os.path.join("build", "report-example"), help="relative to the checkout")
    parser.add_argument("--screenshot", metavar="PNG", help="also save a screenshot of the page's top here")
    args = parser.parse_args()
    if args.screenshot:
        args.screenshot = os.path.abspath(args.screenshot)
    os.chdir(ROOT)  # the page names the traces as given: relative paths, the same on every machine
    os.makedirs(args.out, exist_ok=True)
    golden = os.path.join("goldens", "estimator_model.h5")
    model, step = estimator_model.make(epsilon=1e-7)
    actual = tracekit.tf2.replay(golden, step, model=model, out=os.path.join(args.out, "adam_epsilon.h5"))
    result = tracekit.compare(golden, actual, tracekit.Tolerance.training())
    page = result.write_html(os.path.join(args.out, "adam_epsilon.html"))
    print(result.report().splitlines()[0])
    print("wrote %s" % page)
    if args.screenshot:
        screenshot(page, args.screenshot)
        print("wrote %s" % args.screenshot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
