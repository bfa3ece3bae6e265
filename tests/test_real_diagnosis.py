"""Files the real benchmark tools wrote against the OpenAI simulator (tests/fixtures/real/<tool>/<scenario>/) are
diagnosed to their scenario's cause, first, when the SLO is set below the scenario's symptom."""

from __future__ import annotations

from pathlib import Path

import pytest

from triage.diagnosis.benchmark import diagnose_run, pick_run
from triage.diagnosis.rules import resolve_slo
from triage.sources.files import load_benchmark

REAL = Path(__file__).parent / "fixtures" / "real"
NOT_RESULTS = {"PROVENANCE.md", "config.yml", "config.yaml", "validation.json", "inputs.json"}
# scenario → (SLO overrides that put the SLO below the scenario's symptom, the cause that must come first)
EXPECTED: dict[str, tuple[dict[str, float], str | None]] = {
    "healthy": ({}, None),
    "queueing": ({"ttft_p99_s": 0.3}, "ttft.queueing"),
    "prefill_bound": ({"ttft_p99_s": 0.3}, "ttft.prefill_compute"),
    "decode_bound": ({"tpot_p99_s": 0.05}, "tpot.memory_bound"),
}
FILES = sorted(p for p in REAL.glob("*/*/*") if p.is_file() and p.name not in NOT_RESULTS
               and p.parent.name in EXPECTED) if REAL.is_dir() else []


def _id(path: Path) -> str:
    return "/".join(path.parts[-3:])


@pytest.mark.skipif(not FILES, reason="no real tool outputs captured yet")
@pytest.mark.parametrize("path", FILES, ids=_id)
def test_real_file_is_diagnosed_to_its_scenario(kb, path):
    overrides, cause = EXPECTED[path.parent.name]
    bench = load_benchmark(path.read_bytes(), path.name)
    diag = diagnose_run(kb, pick_run(bench, None), resolve_slo(kb, "chat", **overrides))
    assert not diag.empty, diag.empty
    causes = [f.cause for f in diag.findings]
    if cause is None:
        assert causes == [], f"{_id(path)}: a healthy run got {causes}"
    else:
        assert causes[:1] == [cause], f"{_id(path)}: expected {cause} first, got {causes}"


@pytest.mark.skipif(not FILES, reason="no real tool outputs captured yet")
def test_every_captured_scenario_is_expected():
    assert {p.parent.name for p in REAL.glob("*/*/PROVENANCE.md")} <= set(EXPECTED)
