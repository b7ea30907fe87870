"""The HTML report in a real headless browser (Chromium from the system packages): it loads with
no console message and its screenshot shows the chart.

Skipped only when Chromium is absent outside CI; with CI=true a missing browser fails (.ci/run
installs it)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile

import pytest

pytest.importorskip("matplotlib")

from dlmcost.cli import main  # noqa: E402

BROWSER = shutil.which("chromium") or shutil.which("chromium-browser")
IN_CI = os.environ.get("CI", "").lower() == "true"
if not BROWSER and not IN_CI:
    pytest.skip("chromium is not installed (apt-get install -y chromium); CI installs it and runs this test",
                allow_module_level=True)

WINDOW = (1400, 1100)


def screenshot(page: str, shot: str) -> str:
    """Load the page headless (no network, no profile), return Chromium's log."""
    assert BROWSER, "CI=true but chromium is not on PATH: .ci/run should have installed it"
    with tempfile.TemporaryDirectory() as profile:
        done = subprocess.run(
            [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
             "--host-resolver-rules=MAP * ~NOTFOUND", f"--window-size={WINDOW[0]},{WINDOW[1]}",
             f"--screenshot={shot}", "--enable-logging=stderr", "--v=0", f"file://{page}"],
            capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stderr


@pytest.mark.parametrize("args", [
    ["analyze", "--gpu", "h100,b200,mi300x", "--scheme", "block", "--block", "32", "--ops"],
    ["analyze", "inclusionAI/LLaDA2.0-mini", "--gpu", "h100,b200", "--tp", "2"],
    ["sweep", "--gpu", "h100,b200", "--block", "1,8,32"],
], ids=["analyze-ops", "moe-tp2", "sweep"])
def test_report_page_in_chromium(args, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    capsys.readouterr()
    assert main([*args, "--format", "html"]) == 0
    page = tmp_path / "report.html"
    page.write_text(capsys.readouterr().out, encoding="utf-8")
    shot = tmp_path / "shot.png"
    log = screenshot(str(page), str(shot))
    console = [line for line in log.splitlines() if ":CONSOLE" in line]
    assert console == [], console
    keep = os.environ.get("DLMCOST_KEEP_SCREENSHOTS")
    if keep:  # for looking at them: DLMCOST_KEEP_SCREENSHOTS=folder pytest tests/test_html_browser.py
        shutil.copy(shot, os.path.join(keep, f"{args[0]}-{len(os.listdir(keep))}.png"))

    import matplotlib.image

    pixels = matplotlib.image.imread(str(shot))[..., :3]
    assert pixels.shape[:2] == (WINDOW[1], WINDOW[0])
    dark = pixels.mean(axis=2) < 0.5
    assert dark.mean() > 0.005  # text and lines, not a blank page
    # the chart: coloured (non-gray) pixels, i.e. the roofs, markers or sweep lines
    colour = (pixels.max(axis=2) - pixels.min(axis=2)) > 0.3
    assert colour.sum() > 500
