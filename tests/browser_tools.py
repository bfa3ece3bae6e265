"""Real-browser plumbing: Streamlit servers on free ports and Debian Chromium through Playwright.

One Chromium per test process (each xdist worker), and each test gets a fresh browser context (its own cookies,
storage and HTTP cache, so its own Streamlit session). Tests that need nothing of the server's own share one
server per process (the ``app_url`` fixture); a test that needs a fresh server, other settings or environment
starts its own with ``streamlit_server``."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.prom_harness import free_port, stop_process

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
ARTIFACTS = ROOT / "tests" / "artifacts"
POINT_XY_JS = """([key, nodeId]) => {
  const gd = document.querySelector(`.st-key-${key} .js-plotly-plot`);
  if (!gd) return null;
  for (let c = 0; c < gd.data.length; c++) {
    const i = Array.from(gd.data[c].customdata || []).indexOf(nodeId);
    if (i < 0) continue;
    const fl = gd._fullLayout, r = gd.getBoundingClientRect();
    return {x: r.left + fl._size.l + fl.xaxis.l2p(gd.data[c].x[i]),
            y: r.top + fl._size.t + fl.yaxis.l2p(gd.data[c].y[i])};
  }
  return null; }"""


def _wait_healthy(url: str, proc: subprocess.Popen, timeout: float = 60.0) -> None:
    """Poll the health endpoint (it opens no app session, so the first page load stays first)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"streamlit exited with {proc.returncode}")
        try:
            if urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).read() == b"ok":
                return
        except OSError:
            time.sleep(0.1)  # polling interval while the server boots, not synchronization of a result
    raise TimeoutError("streamlit did not become healthy")


@contextmanager
def streamlit_server(env: dict[str, str] | None = None, cwd: Path | None = None) -> Iterator[str]:
    """A fresh ``streamlit run app.py`` (this repo's, or the one in ``cwd``) on a free port; stopped by PID."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true",
                             "--server.address", "127.0.0.1", "--server.port", str(port)],
                            cwd=cwd or ROOT, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})})
    try:
        _wait_healthy(url, proc)
        yield url
    finally:
        stop_process(proc)
        log.close()


_SHARED: dict[str, object] = {}
_SOCKETS: dict[object, list] = {}  # page -> its websockets, newest last


def shared_browser():
    """This process's Chromium, launched at first use (about 5 s) and again if it has gone away."""
    browser = _SHARED.get("browser")
    if browser is None or not browser.is_connected():  # type: ignore[attr-defined]
        from playwright.sync_api import sync_playwright

        if "playwright" not in _SHARED:
            _SHARED["playwright"] = sync_playwright().start()
        browser = _SHARED["playwright"].chromium.launch(  # type: ignore[attr-defined]
            executable_path=CHROMIUM, args=ARGS, headless=True)
        _SHARED["browser"] = browser
    return browser


def close_shared_browser() -> None:
    """Close this process's Chromium and Playwright driver, if a test started them (tests/conftest.py)."""
    browser, playwright = _SHARED.pop("browser", None), _SHARED.pop("playwright", None)
    try:
        if browser is not None:
            browser.close()  # type: ignore[attr-defined]
    finally:
        if playwright is not None:
            playwright.stop()  # type: ignore[attr-defined]


@contextmanager
def chromium_page() -> Iterator[object]:
    """A page in a fresh context of the shared Chromium: nothing carried over from another test or page."""
    context = shared_browser().new_context(viewport={"width": 1440, "height": 1000})
    page = context.new_page()
    sockets: list = []
    page.on("websocket", lambda ws: sockets.append(ws))  # its connections to Streamlit, for after_rerun
    _SOCKETS[page] = sockets
    try:
        yield page
    finally:
        _SOCKETS.pop(page, None)
        context.close()


@pytest.fixture(scope="session")
def app_url(tmp_path_factory) -> Iterator[str]:
    """One ``streamlit run app.py`` for the process's tests that change nothing of the server's own (each has its
    own browser context, so its own session); its experiment log is a file of this run."""
    log = tmp_path_factory.mktemp("shared-app") / "log.sqlite3"
    with streamlit_server({"TRIAGE_LOG_DB": str(log)}) as url:
        yield url


_SCRIPT_FINISHED_JS = """() => document.querySelector('[data-test-script-state]')
  ?.getAttribute('data-test-script-state') === 'notRunning' && !document.querySelector('[data-stale="true"]')"""


def script_finished(page, timeout_ms: int = 60000) -> None:
    """Wait until no script run (a page's, a rerun's or a fragment's timed one) is in progress: Streamlit's
    run-state attribute on the app reads 'notRunning' and no element of an earlier run stands stale (a run
    stopped for a rerun reads 'notRunning' for a moment, but leaves its stale elements until the next run ends)."""
    page.wait_for_function(_SCRIPT_FINISHED_JS, timeout=timeout_ms)


_PLOT_SETTLED_JS = """(key) => { const gd = document.querySelector(`.st-key-${key} .js-plotly-plot`);
  return !!gd && !!gd._fullLayout && Math.abs(gd._fullLayout.width - gd.getBoundingClientRect().width) < 2; }"""


def click_tree_node(page, node_id: str, key: str = "tree") -> None:
    """Click a node of the plotly tree at its drawn place, once the page's run is over and the plot has taken its
    final width (a click computed from an earlier layout lands beside the node)."""
    page.wait_for_selector(f".st-key-{key} .js-plotly-plot .scatterlayer path.point", timeout=60000)
    script_finished(page)
    page.wait_for_function(_PLOT_SETTLED_JS, arg=key, timeout=60000)
    point = page.evaluate(POINT_XY_JS, [key, node_id])
    assert point is not None, f"node {node_id} is not drawn"
    page.mouse.click(point["x"], point["y"])


def english_ui_sentences(min_words: int = 3) -> set[str]:
    """Sentences of the English UI strings (tree/ui.yaml) that a Chinese page must not show.

    Each English value is cut at its {placeholders}; pieces of ``min_words`` words or more are kept, unless
    the Chinese value says the same (product names, flags)."""
    import re

    from triage.knowledge.i18n import load_strings

    out: set[str] = set()
    for text in load_strings().values():
        if text.en == text.zh:
            continue
        for piece in re.split(r"\{[^}]*\}|`[^`]*`|\*\*", text.en):
            piece = piece.strip(" .,:;—–-()…\n")
            if len(piece.split()) >= min_words and piece not in text.zh:
                out.add(piece)
    return out


def _run_finished(payload: str | bytes) -> bool:
    """A frame from the server saying a script run (or a fragment's) ended, not one stopped for a rerun."""
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    if not isinstance(payload, bytes):
        return False
    msg = ForwardMsg()
    msg.ParseFromString(payload)
    return msg.WhichOneof("type") == "script_finished" and msg.script_finished in (
        ForwardMsg.FINISHED_SUCCESSFULLY, ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY)


def after_rerun(page, act, timeout_ms: int = 60000) -> None:
    """Do ``act`` and return once the script run it starts has finished and the page shows its end, so the next
    step does not race a rerun that replaces the element it acts on.

    It first waits for the run in progress to end (the element acted on may be drawn before the page's own run
    finishes). The end of the new run is the server's own message on the page's websocket: the run-state
    attribute is no witness, since a busy browser can take a short run's start and end in one render and the
    attribute never leaves 'notRunning'."""
    script_finished(page, timeout_ms)
    socket = _SOCKETS[page][-1]  # the page's current connection (a reload or goto opens a new one)
    with socket.expect_event("framereceived", predicate=_run_finished, timeout=timeout_ms):
        act()
    script_finished(page, timeout_ms)
