"""The HTML report in a real headless browser (Chromium from the system packages): it loads with
no console message, its screenshot shows the chart, and a click on a column's header sorts the
table by that column (the page's inline script; no network).

One Chromium serves every page (started once for the module, driven over the DevTools protocol on
a pipe, `--remote-debugging-pipe`): a start costs more than a page. Skipped only when Chromium is
absent outside CI; with CI=true a missing browser fails (.ci/run installs it)."""

from __future__ import annotations

import base64
import fcntl
import json
import os
import re
import select
import shutil
import subprocess
import tempfile
import time

import pytest

pytest.importorskip("matplotlib")

from dlmcost.cli import main  # noqa: E402

BROWSER = shutil.which("chromium") or shutil.which("chromium-browser")
IN_CI = os.environ.get("CI", "").lower() == "true"
if not BROWSER and not IN_CI:
    pytest.skip("chromium is not installed (apt-get install -y chromium); CI installs it and runs this test",
                allow_module_level=True)

WINDOW = (1400, 1100)
TIMEOUT_S = 120
# what a page says to its console: console.* calls, uncaught exceptions, the browser's own entries
# (a resource that failed to load, a blocked request)
CONSOLE_EVENTS = ("Runtime.consoleAPICalled", "Runtime.exceptionThrown", "Log.entryAdded")


class Chromium:
    """A headless Chromium (no network, no profile) and one tab, over the DevTools protocol on
    fds 3 and 4 (JSON messages ended by NUL)."""

    def __init__(self, browser: str, profile: str, log):
        def above_stdio(fd: int) -> int:  # fds >= 10, so that bash can put them on 3 and 4
            new = fcntl.fcntl(fd, fcntl.F_DUPFD, 10)
            os.close(fd)
            return new

        to_browser, self._commands = map(above_stdio, os.pipe())
        self._answers, from_browser = map(above_stdio, os.pipe())
        self.proc = subprocess.Popen(
            ["bash", "-c", f'exec "$0" "$@" 3<&{to_browser} 4>&{from_browser} {to_browser}<&- {from_browser}>&-',
             browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
             "--host-resolver-rules=MAP * ~NOTFOUND", f"--window-size={WINDOW[0]},{WINDOW[1]}",
             "--enable-logging=stderr", "--v=0", "--remote-debugging-pipe", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log, pass_fds=(to_browser, from_browser))
        os.close(to_browser)
        os.close(from_browser)
        self._log, self._pending, self._id, self.events = log, b"", 0, []
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.call(f"{domain}.enable", self.session)
        self.call("Emulation.setDeviceMetricsOverride", self.session, width=WINDOW[0], height=WINDOW[1],
                  deviceScaleFactor=1, mobile=False)

    def _receive(self, deadline: float) -> dict:
        while b"\0" not in self._pending:
            ready, _, _ = select.select([self._answers], [], [], max(0.0, deadline - time.monotonic()))
            chunk = os.read(self._answers, 1 << 20) if ready else None
            if not chunk:
                self._log.seek(0)
                raise AssertionError(f"chromium {'timed out' if chunk is None else 'exited'}: {self._log.read()[-2000:]}")
            self._pending += chunk
        message, self._pending = self._pending.split(b"\0", 1)
        return json.loads(message)

    def call(self, method: str, session: str | None = None, **params) -> dict:
        self._id += 1
        command = {"id": self._id, "method": method, "params": params, **({"sessionId": session} if session else {})}
        os.write(self._commands, json.dumps(command).encode() + b"\0")
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            message = self._receive(deadline)
            if message.get("id") == self._id:
                assert "error" not in message, message
                return message["result"]
            self.events.append(message)

    def wait_for(self, method: str) -> None:
        deadline = time.monotonic() + TIMEOUT_S
        while not any(e.get("method") == method for e in self.events):
            self.events.append(self._receive(deadline))

    def close(self) -> int:
        """Ask the browser to quit; its exit status."""
        try:
            self.call("Browser.close")
        except AssertionError:  # already gone
            pass
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._commands)
        os.close(self._answers)
        return self.proc.returncode


@pytest.fixture(scope="module")
def chromium():
    assert BROWSER, "CI=true but chromium is not on PATH: .ci/run should have installed it"
    with tempfile.TemporaryDirectory() as profile, tempfile.TemporaryFile("w+") as log:
        browser = Chromium(BROWSER, profile, log)
        try:
            yield browser
        finally:
            status = browser.close()
        log.seek(0)
        assert status == 0, log.read()[-2000:]  # and it ran to a clean exit


def screenshot(browser: Chromium, page: str, shot: str) -> list[str]:
    """Load the page, write its screenshot; what it said to the console (the protocol's events, and
    the lines Chromium logged for them on stderr while it loaded)."""
    browser.events.clear()
    browser._log.seek(0, os.SEEK_END)
    logged_from = browser._log.tell()
    browser.call("Page.navigate", browser.session, url=f"file://{page}")
    browser.wait_for("Page.loadEventFired")
    png = browser.call("Page.captureScreenshot", browser.session, format="png")["data"]
    with open(shot, "wb") as f:
        f.write(base64.b64decode(png))
    browser._log.seek(logged_from)
    logged = [line for line in browser._log.read().splitlines() if ":CONSOLE" in line]
    return [json.dumps(e["params"])[:500] for e in browser.events if e.get("method") in CONSOLE_EVENTS] + logged


def evaluate(browser: Chromium, expression: str):
    """The value of a JavaScript expression in the loaded page."""
    answer = browser.call("Runtime.evaluate", browser.session, expression=expression, returnByValue=True)
    assert "exceptionDetails" not in answer, answer
    return answer["result"].get("value")


def column(browser: Chromium, table: str, header: str) -> list[str]:
    """Click the header (as shown: line breaks as spaces) of the table (a CSS selector) and read
    that column's cells, top to bottom."""
    return evaluate(browser, f"""(function () {{
        var t = document.querySelector({json.dumps(table)});
        var th = Array.prototype.find.call(t.tHead.rows[0].cells, function (c) {{ return c.textContent === {json.dumps(header)}; }});
        th.click();
        return Array.prototype.map.call(t.tBodies[0].rows, function (r) {{ return r.cells[th.cellIndex].textContent; }});
    }})()""")


def as_number(cell: str) -> float:
    """A cell as the tables write numbers: thousands commas, marks (*, !) after them."""
    return float(cell.rstrip("*!").replace(",", ""))


# (the page's table, a numeric column, a text column whose cells hold numbers) per page checked for
# sorting; the plan's headroom holds numbers with a thousands comma (1,359) beside shorter ones
# (731), which sorted as text would come first
SORTED = {"serve": ("table", "e2e p99 s", "load"), "plan": ("#deployments", "head %", "GPU")}


@pytest.mark.parametrize("args", [
    ["analyze", "--gpu", "h100,b200,mi300x", "--scheme", "block", "--block", "32", "--ops"],
    ["analyze", "inclusionAI/LLaDA2.0-mini", "--gpu", "h100,b200", "--tp", "2"],
    ["sweep", "--gpu", "h100,b200", "--block", "1,8,32"],
    ["serve", "--gpu", "h100,mi300x", "--answer", "64", "--rate", "0.2,0.5,2,8", "--requests", "200"],
    ["plan", "inclusionAI/LLaDA2.0-mini,Qwen/Qwen3-30B-A3B", "--gpu", "h100,mi300x", "--rate", "4", "--p95", "20",
     "--requests", "200"],
], ids=["analyze-ops", "moe-tp2", "sweep", "serve", "plan"])
def test_report_page_in_chromium(args, tmp_path, capsys, monkeypatch, chromium):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    capsys.readouterr()
    assert main([*args, "--format", "html"]) == 0
    page = tmp_path / "report.html"
    page.write_text(capsys.readouterr().out, encoding="utf-8")
    shot = tmp_path / "shot.png"
    console = screenshot(chromium, str(page), str(shot))
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
    # a summary line on top, and a legend entry (and a tooltip) for every column of every table
    assert evaluate(chromium, "document.querySelector('#summary').textContent.length") > 40
    assert evaluate(chromium, """Array.prototype.every.call(document.querySelectorAll('th'), function (th) {
        return th.title.length > 0; })""")
    if args[0] in SORTED:
        table, numeric, text = SORTED[args[0]]
        up = column(chromium, table, numeric)
        assert len(up) > 3 and [as_number(c) for c in up] == sorted(as_number(c) for c in up)
        assert args[0] != "plan" or (any("," in c for c in up) and any(len(c) == 3 for c in up)), up
        down = column(chromium, table, numeric)  # a second click: the other way
        assert [as_number(c) for c in down] == sorted((as_number(c) for c in up), reverse=True)
        words = column(chromium, table, text)
        assert words == sorted(words, key=lambda s: [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", s)])
