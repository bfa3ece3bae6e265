"""Upload bytes are not kept past the parse: after a page parses an upload, nothing the session holds (its
state, its widget values, the Live page's fragment) keeps the file's bytes or text; a later run still shows it."""

from __future__ import annotations

import gc
import io
import types
from collections.abc import Iterator

import pytest
import streamlit as st

from tests.apptest_tools import open_page
from tests.synthetic import requests
from triage.sources.metrics.simulator import Simulator

LARGE = 256 * 1024  # every upload below is larger than this; nothing the session keeps may be
COLUMNS = ["start_s", "prompt_tokens", "output_tokens", "ttft_s", "e2e_s", "ok"]


@pytest.fixture(autouse=True)
def _isolated(monkeypatch, tmp_path):
    st.cache_data.clear()
    monkeypatch.setenv("TRIAGE_LOG_DB", str(tmp_path / "log.sqlite3"))
    yield


def _large_held(roots: list[object]) -> Iterator[tuple[str, int]]:
    """(type, size) of each bytes-like or str object over LARGE reachable from ``roots``.

    Modules, classes and functions' globals are not followed (they reach the whole process, caches included);
    a function's closure and defaults are."""
    seen: set[int] = set()
    stack = list(roots)
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, (types.ModuleType, type)):
            continue
        seen.add(id(obj))
        if isinstance(obj, (bytes, bytearray, str, memoryview)):
            if len(obj) > LARGE:
                yield type(obj).__name__, len(obj)
            continue
        if isinstance(obj, io.BytesIO):
            try:
                with obj.getbuffer() as view:
                    if view.nbytes > LARGE:
                        yield type(obj).__name__, view.nbytes
            except ValueError:  # closed
                pass
        if isinstance(obj, types.FunctionType):
            stack.extend([obj.__closure__, obj.__defaults__, obj.__kwdefaults__])
            continue
        stack.extend(gc.get_referents(obj))


def held_by_session(at) -> list[tuple[str, int]]:
    return list(_large_held([at._session_state, at._fragment_storage]))


def csv(seed: int, ttft: float = 0.3) -> bytes:
    data = requests(n=8000, ttft_base=ttft, seed=seed)[COLUMNS].to_csv(index=False).encode()
    assert len(data) > LARGE
    return data


def metrics_text(sim: Simulator) -> bytes:
    text = sim.render()
    # comments are part of an exposition: they pad it past LARGE without changing a value
    return (text + "".join(f"# padding line {i:06d} {'x' * 100}\n" for i in range(3000))).encode()


def test_the_walk_finds_bytes_it_is_given():
    data = b"x" * (LARGE + 1)
    assert list(_large_held([{"k": [io.BytesIO(data)]}])) == [("BytesIO", LARGE + 1)]
    assert list(_large_held([(lambda: data)])) == [("bytes", LARGE + 1)]


def test_verify_uploads_keep_no_bytes_and_still_compare():
    at = open_page("pages/verify.py")
    at.file_uploader(key="verify_base").upload("base.csv", csv(1, 0.4), "text/csv")
    at.file_uploader(key="verify_cand").upload("cand.csv", csv(2, 0.2), "text/csv").run()
    assert not at.exception, at.exception
    assert at.session_state["verify_result"] == "gain confirmed"
    assert held_by_session(at) == []
    at.text_input(key="verify_who").input("oncall").run()  # a later run: still compared, from the cache
    assert not at.exception, at.exception
    assert at.session_state["verify_result"] == "gain confirmed"
    at.button(key="verify_save").click().run()
    assert "Saved as experiment #1" in " ".join(s.value for s in at.success)
    assert held_by_session(at) == []


def test_live_snapshots_keep_no_bytes_and_still_diagnose():
    at = open_page("pages/live.py")
    next(b for b in at.get("button_group") if b.key == "live_kind").set_value("snapshots").run()
    sim = Simulator("queueing", seed=1)
    before = metrics_text(sim)
    sim.advance(120)
    at.file_uploader(key="snap_before").upload("a.txt", before, "text/plain")
    at.file_uploader(key="snap_after").upload("b.txt", metrics_text(sim), "text/plain")
    at.number_input(key="snap_interval").set_value(120.0).run()
    assert not at.exception, at.exception
    assert at.session_state["findings"][0] == "ttft.queueing"
    assert held_by_session(at) == []
    at.number_input(key="snap_interval").set_value(60.0).run()  # a later run: parsed snapshots, not bytes
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    assert at.session_state["findings"][0] == "ttft.queueing"
    assert held_by_session(at) == []


def test_benchmark_upload_keeps_no_bytes():
    at = open_page("pages/benchmark.py")
    at.file_uploader(key="bench_upload").upload("run.csv", csv(3), "text/csv").run()
    assert not at.exception, at.exception
    assert at.session_state["bench_uploads"].viewed is not None and not at.error
    assert held_by_session(at) == []
