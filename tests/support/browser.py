"""A headless Chromium driven over the Chrome DevTools protocol (websocket-client), for tests that
look at a page as a person would: open it from disk, evaluate what is shown, collect every
JavaScript error and console error, take screenshots."""

from __future__ import annotations

import base64
import itertools
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "chrome")


def chromium_path() -> str | None:
    return next((path for name in CHROMIUM_NAMES if (path := shutil.which(name))), None)


def require_chromium():
    """The browser's path; outside CI a missing browser skips the test with the reason, in CI
    (CI=true) it fails: the Makefile's `test` target installs Debian's chromium."""
    import pytest

    path = chromium_path()
    if path is None:
        reason = "no chromium on PATH (Debian: apt-get install chromium; `make test` installs it)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason + " - CI must run the browser tests")
        pytest.skip(reason)
    return path


class Browser:
    def __init__(self, executable: str, width: int = 1400, height: int = 1000):
        import websocket

        self.profile = Path(tempfile.mkdtemp(prefix="mmle-chromium-"))
        self.process = subprocess.Popen(
            [executable, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
             "--no-first-run", "--no-default-browser-check", "--remote-debugging-port=0",
             f"--user-data-dir={self.profile}", f"--window-size={width},{height}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port_file = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not port_file.is_file() or len(port_file.read_text().splitlines()) < 2:
            if time.monotonic() > deadline or self.process.poll() is not None:
                self.close()
                raise RuntimeError("chromium did not start (no DevToolsActivePort)")
            time.sleep(0.1)
        port, path = port_file.read_text().splitlines()[:2]
        self.socket = websocket.create_connection(f"ws://127.0.0.1:{port}{path}", timeout=120)
        self.ids = itertools.count(1)
        self.events: list[dict] = []

    def send(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        message_id = next(self.ids)
        message = {"id": message_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        self.socket.send(json.dumps(message))
        while True:
            reply = json.loads(self.socket.recv())
            if reply.get("id") == message_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def open(self, url: str) -> "Page":
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        page = Page(self, session)
        for domain in ("Runtime", "Log", "Page"):
            self.send(f"{domain}.enable", session=session)
        self.send("Page.navigate", {"url": url}, session=session)
        page.wait("document.readyState === 'complete'")
        return page

    def close(self):
        try:
            if getattr(self, "socket", None):
                self.socket.close()
        finally:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
            shutil.rmtree(self.profile, ignore_errors=True)


class Page:
    def __init__(self, browser: Browser, session: str):
        self.browser, self.session = browser, session

    def eval(self, expression: str):
        result = self.browser.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                        "awaitPromise": True}, session=self.session)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression[:80]}: {result['exceptionDetails'].get('text')} "
                               f"{result['exceptionDetails'].get('exception', {}).get('description', '')}")
        return result["result"].get("value")

    def wait(self, expression: str, timeout: float = 60.0):
        """Poll until `expression` is truthy (its value), failing after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.eval(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for: {expression}")
            time.sleep(0.1)

    def go(self, hash_part: str):
        self.eval(f"location.hash = {json.dumps(hash_part)}")

    def errors(self) -> list[str]:
        """JavaScript exceptions, console.error calls and browser errors (a file that failed to
        load) of this page so far."""
        self.eval("1")  # drain the events the page sent meanwhile
        out = []
        for event in self.browser.events:
            if event.get("sessionId") != self.session:
                continue
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.exceptionThrown":
                details = params["exceptionDetails"]
                out.append(details.get("exception", {}).get("description") or details.get("text"))
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                out.append(" ".join(str(a.get("value", a.get("description"))) for a in params.get("args", [])))
            elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
                out.append(f"{params['entry'].get('text')} {params['entry'].get('url', '')}")
        return out

    def screenshot(self, path: Path, full_page: bool = False) -> Path:
        params = {"format": "png", "captureBeyondViewport": full_page}
        data = self.browser.send("Page.captureScreenshot", params, session=self.session)["data"]
        Path(path).write_bytes(base64.b64decode(data))
        return Path(path)
