"""Headless Chromium driven over its DevTools protocol (a WebSocket, aiohttp's client): open a page at
a given window width, evaluate a JavaScript expression in it (layout measurements), and capture a
full-page PNG screenshot. Used by the viewer's browser test (tests/viewer/test_viewer_browser.py)
and by the screenshot command (benchmarks/viewer_screenshots.py); needs `chromium` on PATH
(Debian: apt-get install chromium)."""

from __future__ import annotations

import asyncio
import base64
import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from tests.support.processes import stop_process

# Chromium prints this line on stderr once its DevTools endpoint listens.
LISTENING = re.compile(r"DevTools listening on (ws://\S+)")
START_TIMEOUT_S = 60
PAGE_TIMEOUT_S = 120


def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


class Browser:
    """One headless Chromium process; `open(url, width)` gives a Page (a new tab) at that width."""

    def __init__(self, binary: str | None = None):
        self.binary = binary or chromium_path()
        if self.binary is None:
            raise FileNotFoundError("no chromium on PATH (Debian: apt-get install chromium)")
        self._profile = tempfile.TemporaryDirectory(prefix="arag-chromium-")
        self._process: subprocess.Popen | None = None
        self.endpoint = ""

    def __enter__(self) -> "Browser":
        self._process = subprocess.Popen(
            [self.binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars",
             f"--user-data-dir={self._profile.name}", "--remote-debugging-port=0", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        seen = []
        for line in self._process.stderr:  # type: ignore[union-attr]
            seen.append(line)
            m = LISTENING.search(line)
            if m:
                self.endpoint = m.group(1)
                break
        if not self.endpoint:
            self.__exit__(None, None, None)
            raise RuntimeError("chromium did not start its DevTools endpoint:\n" + "".join(seen[-20:]))
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._process is not None:
            stop_process(self._process)
        self._profile.cleanup()

    def run(self, url: str, width: int, expression: str | None = None, screenshot: Path | None = None, height: int = 900) -> Any:
        """Load `url` in a window `width` × `height` CSS pixels; the value of `expression` (JSON-able)
        and/or a full-page PNG written to `screenshot`."""
        return asyncio.run(self._run(url, width, height, expression, screenshot))

    async def _run(self, url: str, width: int, height: int, expression: str | None, screenshot: Path | None) -> Any:
        import aiohttp

        port = self.endpoint.split("//", 1)[1].split("/", 1)[0]
        async with aiohttp.ClientSession() as http:
            async with http.put(f"http://{port}/json/new?about:blank") as response:
                target = json.loads(await response.text())
            try:
                async with http.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=0, timeout=aiohttp.ClientWSTimeout(ws_close=10)) as ws:
                    page = _Session(ws)
                    await page.call("Page.enable")
                    await page.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)
                    await page.call("Page.navigate", url=url)
                    await asyncio.wait_for(page.event("Page.loadEventFired"), PAGE_TIMEOUT_S)
                    value = None
                    if expression is not None:
                        result = await page.call("Runtime.evaluate", expression=expression, returnByValue=True)
                        if "exceptionDetails" in result:
                            raise RuntimeError(f"{expression!r} failed in {url}: {result['exceptionDetails']}")
                        value = result["result"].get("value")
                    if screenshot is not None:
                        shot = await page.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
                        Path(screenshot).write_bytes(base64.b64decode(shot["data"]))
                    return value
            finally:
                async with http.get(f"http://{port}/json/close/{target['id']}"):
                    pass


class _Session:
    """Calls and events of one DevTools target over its WebSocket."""

    def __init__(self, ws: Any):
        self.ws = ws
        self.next_id = 0
        self.events: list[dict] = []

    async def call(self, method: str, **params: Any) -> dict:
        self.next_id += 1
        await self.ws.send_str(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = json.loads((await asyncio.wait_for(self.ws.receive(), PAGE_TIMEOUT_S)).data)
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            if "method" in message:
                self.events.append(message)

    async def event(self, name: str) -> dict:
        while True:
            for e in self.events:
                if e["method"] == name:
                    self.events.remove(e)
                    return e
            message = json.loads((await self.ws.receive()).data)
            if "method" in message:
                self.events.append(message)
