"""vLLM and SGLang server logs as a source: stats-line forms, wrappers, cut pastes, the window, real excerpts."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.cli_tools import python_m_triage, run_triage
from triage.diagnosis.rules import resolve_slo
from triage.knowledge.needs import Need
from triage.service.logs import diagnose_log
from triage.sources.logs import detect_log, read_log
from triage.sources.logs.derived import log_readings
from triage.sources.logs.window import LogWindow

ROOT = Path(__file__).resolve().parent.parent
REAL = ROOT / "tests" / "fixtures" / "real" / "logs"

V1 = ("INFO 09-07 06:35:{s:02d} [loggers.py:123] Engine 000: Avg prompt throughput: {p} tokens/s, Avg generation "
      "throughput: {g} tokens/s, Running: {r} reqs, Waiting: {w} reqs, GPU KV cache usage: {kv}%, Prefix cache hit "
      "rate: {hit}%")
V0 = ("INFO 01-22 18:27:{s:02d} metrics.py:449] Avg prompt throughput: {p} tokens/s, Avg generation throughput: {g} "
      "tokens/s, Running: {r} reqs, Swapped: 0 reqs, Pending: {w} reqs, GPU KV cache usage: {kv}%, CPU KV cache "
      "usage: 0.0%.")


def parse(text: str):
    data = text.encode()
    fmt = detect_log(data[:65536])
    assert fmt is not None, "not detected as a log"
    return read_log([data[i:i + 97] for i in range(0, len(data), 97)], fmt, "t")  # odd chunks split lines


def v1(seconds: int, r: int, w: int, kv: float, p: float = 0.0, g: float = 500.0, hit: float = 0.0) -> str:
    return V1.format(s=seconds, r=r, w=w, kv=kv, p=p, g=g, hit=hit)


def triage(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    """The CLI in this process (tests/cli_tools.py); reading standard input launches the real `python -m triage`."""
    return run_triage(*args, stdin=stdin)


def test_v1_line_is_read_field_by_field() -> None:
    log = parse(v1(10, 18, 43, 95.9, p=12.5, g=1055.3, hit=42.0) + "\n")
    (s,) = log.samples
    got = (s.prompt_tps, s.gen_tps, s.running, s.waiting, s.kv, s.prefix_hit)
    assert got == pytest.approx((12.5, 1055.3, 18, 43, 0.959, 0.42))
    assert log.fmt == "vllm_v1_log" and log.stats_lines == 1


def test_v0_line_reads_pending_as_waiting_and_the_five_second_interval() -> None:
    log = parse("\n".join(V0.format(s=s, p=0.0, g=41.7, r=1, w=3, kv=82.1) for s in (0, 5, 10)))
    assert log.fmt == "vllm_v0_log" and log.interval_s == 5.0
    assert [s.waiting for s in log.samples] == [3, 3, 3] and log.span_s == 10
    assert log.preemptions_logged  # V0 warns on every preemption: none logged means none happened


@pytest.mark.parametrize("wrap", [
    "vllm-1  | {line}",                                          # docker compose
    "2026-03-01T10:00:00.123456789Z stdout F {line}",             # Kubernetes CRI
    "Mar 01 10:00:00 gpu-node-3 vllm[4242]: {line}",              # journald
    "(APIServer pid=1) {line}",
    "{line}",
])
def test_wrappers_before_the_message_are_ignored(wrap: str) -> None:
    text = "\n".join(wrap.format(line=v1(s, 8, 2, 50.0)) for s in (0, 10, 20))
    log = parse(text + "\n" + wrap.format(line="INFO:     127.0.0.1:1 - \"GET /metrics HTTP/1.1\" 200 OK"))
    assert log.stats_lines == 3 and log.skipped == 1 and log.span_s == 20


def test_kubernetes_partial_lines_are_joined() -> None:
    line = v1(0, 4, 0, 10.0)
    cut = len(line) // 2
    text = f"2026-03-01T10:00:00Z stdout P {line[:cut]}\n2026-03-01T10:00:00Z stdout F {line[cut:]}\n"
    (s,) = parse(text).samples
    assert s.running == 4 and s.prefix_hit == 0.0


def test_a_paste_wrapped_mid_word_is_rejoined_and_a_cut_last_line_keeps_what_it_has() -> None:
    log = parse((REAL / "vllm_v1_k8s_wrapped_kv_full.txt").read_text())
    assert [s.waiting for s in log.samples] == [18, 40, 47]
    assert log.samples[-1].kv is None and log.samples[-1].gen_tps == 719.3  # cut after "GPU KV"


def test_several_engines_are_summed_for_counts_and_maxed_for_ratios() -> None:
    lines = [v1(s, 10, 5, 40.0).replace("Engine 000", "Engine 000") for s in (0, 10)]
    lines += [v1(s, 6, 1, 90.0).replace("Engine 000", "Engine 001") for s in (0, 10)]
    window = LogWindow(parse("\n".join(lines)))
    read = window.read([Need("gauge_mean", "running"), Need("gauge_max", "kv_usage"), Need("gauge_mean", "waiting")])
    assert read.values[Need("gauge_mean", "running")] == 16
    assert read.values[Need("gauge_max", "kv_usage")] == pytest.approx(0.9)
    assert read.values[Need("gauge_mean", "waiting")] == 6


def test_the_series_sums_engines_never_lines_of_one_engine_in_one_second() -> None:
    running, waiting = Need("gauge_mean", "running"), Need("gauge_mean", "waiting")
    gen = Need("rate", "generation_tokens")
    # SGLang prints two Decode batch lines in second 03:51:45, each saying 4 running, 3 queued
    full = LogWindow(parse((REAL / "sglang_decode_kv_full.txt").read_text())).series([running, waiting, gen])
    assert [p.value for p in full[running]] == [4, 4] and [p.value for p in full[waiting]] == [3, 3]
    assert [p.value for p in full[gen]] == pytest.approx([429.34, (429.52 + 429.74) / 2])
    lines = [v1(s, 10, 5, 40.0, g=100.0) for s in (0, 10)]
    lines += [v1(s, 6, 1, 90.0, g=50.0).replace("Engine 000", "Engine 001") for s in (0, 10)]
    two = LogWindow(parse("\n".join(lines))).series([running, Need("gauge_max", "kv_usage"), gen])
    assert [p.value for p in two[running]] == [16, 16]
    assert [p.value for p in two[Need("gauge_max", "kv_usage")]] == pytest.approx([0.9, 0.9])
    assert [p.value for p in two[gen]] == [150, 150]



def test_the_pasted_chart_and_the_log_comparison_read_the_same_seconds_as_the_series() -> None:
    """The paste box's chart (service.pasted.log_frame) and Verify's stats rows (verify.logs) once summed
    SGLang's two Decode lines of one second too (running 4 drawn as 8): all three read series.per_second."""
    from triage.service.pasted import log_frame
    from triage.verify.logs import _by_time

    log = parse((REAL / "sglang_decode_kv_full.txt").read_text())
    assert log_frame(log)["running"].tolist() == [4, 4] and log_frame(log)["waiting"].tolist() == [3, 3]
    assert [row["running"] for row in _by_time(log)] == [4, 4]

def test_spec_decoding_and_preemption_field_lines() -> None:
    text = "\n".join([
        v1(0, 8, 0, 50.0).replace("Waiting: 0 reqs, ", "Waiting: 0 reqs, Preemptions: 3, "),
        "INFO 09-07 06:35:00 [metrics.py:80] SpecDecoding metrics: Mean acceptance length: 1.80, Accepted throughput: "
        "40.00 tokens/s, Drafted throughput: 100.00 tokens/s, Accepted: 400 tokens, Drafted: 1000 tokens, "
        "Per-position acceptance rate: 0.500, 0.300, Avg Draft acceptance rate: 40.0%",
        v1(10, 8, 0, 50.0),
        "INFO 09-07 06:35:10 [metrics.py:80] SpecDecoding metrics: Draft acceptance rate: 30.0%, Accepted: 300 "
        "tokens, Drafted: 1000 tokens",
    ])
    window = LogWindow(parse(text))
    needs = [Need("rate", "preemptions"), Need("rate", "spec_accepted_tokens"), Need("rate", "spec_draft_tokens"),
             Need("gauge_mean", "spec_accept_rate")]
    read = window.read(needs)
    assert read.values[needs[0]] == pytest.approx(3 / 10)
    assert read.values[needs[1]] / read.values[needs[2]] == pytest.approx(0.35)
    assert read.values[needs[3]] == pytest.approx(0.35)


def test_v1_without_a_preemption_field_says_not_measurable_from_a_log() -> None:
    read = LogWindow(parse(v1(0, 8, 0, 50.0) + "\n" + v1(10, 8, 0, 50.0))).read([Need("rate", "preemptions"),
                                                                               Need("quantile", "ttft", 0.99)])
    assert read.values[Need("rate", "preemptions")] is None
    assert read.missing[Need("rate", "preemptions")].startswith("not measurable from a log")
    assert read.missing[Need("quantile", "ttft", 0.99)].startswith("not measurable from a log")


def test_a_concurrency_cap_is_named_with_max_num_seqs(kb) -> None:
    """Constructed (no real excerpt of a cap was found): running pinned at 16, the queue growing, KV at 40 %."""
    text = "\n".join(v1(s, 16, 5 + s, 40.0 + s / 10) for s in range(0, 60, 10))
    readings = {r.name: r for r in log_readings(parse(text))}
    cap = readings["running_cap"]
    assert cap.value == 16 and "--max-num-seqs" in cap.text and "first 5, last 55" in cap.text
    found = diagnose_log(kb, parse(text), resolve_slo(kb))
    assert not found.live.diagnosis.findings  # no symptom a log can measure: nothing is called healthy either
    assert all(c.present is not True for c in found.live.diagnosis.symptoms)


def test_no_cap_when_the_kv_cache_is_what_holds_the_batch() -> None:
    text = "\n".join(v1(s, 16, 5 + s, 96.0) for s in range(0, 60, 10))
    assert "running_cap" not in {r.name for r in log_readings(parse(text))}


def test_decode_speed_and_tpot_estimate() -> None:
    readings = {r.name: r for r in log_readings(parse(v1(0, 10, 0, 20.0, g=500.0) + "\n" + v1(10, 10, 0, 20.0,
                                                                                                g=300.0)))}
    assert readings["decode_tok_per_s_per_request"].value == pytest.approx(40.0)
    assert readings["tpot_mean_estimate_s"].value == pytest.approx(0.025)


def test_startup_lines_only_is_a_clear_error() -> None:
    text = "\n".join(f"INFO 09-07 06:35:{s:02d} [api_server.py:1] vLLM API server version 0.10.1" for s in range(5))
    with pytest.raises(Exception, match="no periodic stats line"):
        parse(text)


# ---------------------------------------------------------------- the CLI on real excerpts (see PROVENANCE.md)

REAL_CASES = {
    "vllm_v1_apiserver_kv_full.txt": ("memory.kv_cache", {"kv_usage_max": 0.984, "waiting_mean": 32.8}),
    "vllm_v1_k8s_wrapped_kv_full.txt": ("memory.kv_cache", {"kv_usage_max": 0.992}),
    "vllm_v0_swap_preemption.txt": ("memory.kv_cache", {"kv_usage_max": 0.992}),
    "vllm_v0_pending_swap_preemption.txt": ("memory.kv_cache", {"waiting_mean": 98.0}),
    "sglang_decode_kv_full.txt": ("memory.kv_cache", {"kv_usage_max": 1.0, "waiting_mean": 3.0}),
}
FORMAT_SAMPLES = {"vllm_v0_2_one_line_paste.txt", "sglang_single_request.txt", "sglang_prefill_burst.txt"}


@pytest.mark.parametrize("name", sorted(REAL_CASES))
def test_diagnose_names_the_recorded_cause_of_each_real_log(name: str) -> None:
    cause, numbers = REAL_CASES[name]
    out = triage("diagnose", str(REAL / name), "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["findings"][0]["cause"] == cause
    evidence = {e["signal"]: e["value"] for e in data["findings"][0]["evidence"]}
    for signal, value in numbers.items():
        assert evidence[signal] == pytest.approx(value, abs=1e-3)
    assert data["log"]["stats_lines"] >= 2 and data["format"].startswith(("vllm_v", "sglang"))
    assert all(why.startswith("not measurable from a log") for why in data["missing"].values())
    text = triage("diagnose", str(REAL / name)).stdout
    assert "not measurable from a log" in text and "not measurable from this source" not in text
    assert f"[{cause}]" in text


def test_every_real_log_has_a_provenance_entry() -> None:
    provenance = (REAL / "PROVENANCE.md").read_text()
    for path in REAL.glob("*.txt"):
        assert f"`{path.name}`" in provenance and (path.name in REAL_CASES or path.name in FORMAT_SAMPLES)


def test_records_pasted_on_one_line_are_split() -> None:
    log = parse((REAL / "vllm_v0_2_one_line_paste.txt").read_text())
    assert [s.gen_tps for s in log.samples] == [0.0, 77.3, 77.3, 76.8, 76.4] and log.span_s == 20
    readings = {r.name: r.value for r in log_readings(log)}
    assert readings["decode_tok_per_s_per_request"] == pytest.approx((77.3 + 77.3 + 76.8 + 76.4) / 4)


def test_sglang_batch_lines_old_and_new_forms() -> None:
    single = parse((REAL / "sglang_single_request.txt").read_text())
    assert single.fmt == "sglang_log" and single.stats_lines == 8 and single.skipped == 2
    window = LogWindow(single)
    hit = window.read([Need("gauge_mean", "prefix_hit_rate")]).values[Need("gauge_mean", "prefix_hit_rate")]
    assert hit == pytest.approx((1 + 184 + 275) / (103 + 18 + 15 + 1 + 184 + 275))
    burst = parse((REAL / "sglang_prefill_burst.txt").read_text())
    assert [s.waiting for s in burst.samples][:3] == [114, 106, 98] and burst.span_s == 3
    rate = LogWindow(burst).read([Need("rate", "prompt_tokens")]).values[Need("rate", "prompt_tokens")]
    assert rate == pytest.approx(9 * 8192 / 3)
    full = parse((REAL / "sglang_decode_kv_full.txt").read_text())
    assert [s.kv for s in full.samples] == [1.0, 1.0, 1.0]  # "full token usage", not the hybrid "swa" pool


def test_sglang_retractions_count_as_preemptions_once_per_rank_zero() -> None:
    lines = [f"[2026-01-01 10:00:{s:02d} TP{tp}] Decode batch. #running-req: 8, #token: 9000, token usage: 0.97, "
             f"gen throughput (token/s): 400.00, #queue-req: 4, " for s in (0, 10) for tp in (0, 1)]
    lines += [f"[2026-01-01 10:00:05 TP{tp}] KV cache pool is full. Retract requests. #retracted_reqs: 2, "
              "#new_token_ratio: 0.5 -> 0.8" for tp in (0, 1)]
    log = parse("\n".join(lines))
    assert log.stats_lines == 2 and log.retractions == 2
    assert LogWindow(log).read([Need("rate", "preemptions")]).values[Need("rate", "preemptions")] == 0.2


def test_diagnose_reads_standard_input() -> None:
    text = (REAL / "vllm_v1_apiserver_kv_full.txt").read_text()
    out = python_m_triage("diagnose", "-", stdin=text)
    assert out.returncode == 0, out.stderr
    assert "source: stdin (vLLM V1 server log, 5 stats lines over 40 s, 1 line skipped)" in out.stdout
    report = python_m_triage("report", "-", stdin=text)
    assert report.returncode == 0 and "memory.kv_cache" in report.stdout and "vLLM V1 server log" in report.stdout


@pytest.mark.parametrize("stdin", ["hello, world\n", "just some words\n", ""])
def test_unrecognised_or_empty_input_exits_2_with_one_line(stdin: str) -> None:
    out = triage("diagnose", "-", stdin=stdin)
    assert out.returncode == 2 and out.stdout == ""
    assert len(out.stderr.strip().splitlines()) == 1
    if stdin:
        assert "also tried server logs (vLLM server log, SGLang server log)" in out.stderr


def test_the_block_fast_path_reads_what_the_line_path_reads() -> None:
    """parse_chunks (bulk regex over blocks, numpy conversion) against parse (every line through feed)."""
    from triage.sources.logs import vllm
    from triage.sources.logs.lines import iter_lines

    lines = [v1(s % 60, 8 + s % 3, s % 5, 40.0 + s % 50, p=float(s % 7) * 100, g=500.0 + s, hit=12.5)
             for s in range(0, 600, 10)]
    lines[5] = lines[5].replace("Engine 000", "Engine 001")
    lines[9] = lines[9].replace("Waiting: 3 reqs, ", "Waiting: 3 reqs, Preemptions: 2, ")
    lines.insert(20, 'INFO:     127.0.0.1:1 - "GET /metrics HTTP/1.1" 200 OK')
    access = 'INFO:     10.0.0.1:2 - "POST /v1/chat/completions HTTP/1.1" 200 OK'
    sparse = "".join(f"{line}\n" + f"{access}\n" * 30 for line in lines)  # the one-by-one lookup (SPARSE)
    texts = ["\n".join(lines) + "\n", sparse, *(p.read_text() for p in sorted(REAL.glob("vllm_*.txt")))]
    for text in texts:
        data = text.encode()
        slow = vllm.parse(iter_lines([data]))
        fast = vllm.parse_chunks([data[i:i + 3000] for i in range(0, len(data), 3000)])
        assert fast.engines == slow.engines
        assert (fast.lines, fast.stats_lines, fast.skipped, fast.untimed) == (slow.lines, slow.stats_lines,
                                                                           slow.skipped, slow.untimed)


def test_the_column_path_gives_the_readings_and_window_of_the_sample_path(kb) -> None:
    """A log held as numpy columns (parse_chunks) and the same log as Sample lists (parse, line by line) give the
    same readings, window values, series points and diagnosis, to the last bit: the column code keeps every sum
    in the old order. The cases cover a concurrency cap, prefill stalls, several engines and the real logs."""
    from triage.sources.logs import vllm
    from triage.sources.logs.lines import iter_lines
    from triage.sources.logs.series import SampleColumns

    capped = [v1(s % 60, 8, 3 + s % 4, 40.0 + s % 30, p=float(s % 3) * 900, g=800.0 - (s % 3) * 300, hit=12.5)
              .replace("06:35:", f"06:{35 + s // 60}:") for s in range(0, 600, 10)]
    engines = [line.replace("Engine 000", f"Engine 00{i % 2}") for i, line in enumerate(capped)]
    preempted = [line.replace("Waiting: 3 reqs, ", "Waiting: 3 reqs, Preemptions: 2, ") for line in capped]
    texts = ["\n".join(lines) + "\n" for lines in (capped, engines, preempted)]
    texts += [p.read_text() for p in sorted(REAL.glob("vllm_*.txt"))]
    slo = resolve_slo(kb)
    needs = [Need(kind, key) for kind in ("gauge_mean", "gauge_max", "gauge_last", "rate")
             for key in ("running", "waiting", "kv_usage", "prefix_hit_rate", "prompt_tokens", "generation_tokens",
                         "preemptions")]
    held_as_columns = 0
    for text in texts:
        data = text.encode()
        slow, fast = vllm.parse(iter_lines([data])), vllm.parse_chunks([data])
        held_as_columns += any(isinstance(g, SampleColumns) for g in fast.engines.values())
        assert log_readings(fast) == log_readings(slow)
        assert fast.span_s == slow.span_s and fast.preemptions_logged == slow.preemptions_logged
        fast_window, slow_window = LogWindow(fast), LogWindow(slow)
        assert fast_window.read(needs).values == slow_window.read(needs).values
        assert fast_window.series(needs, points=7) == slow_window.series(needs, points=7)
        a, b = diagnose_log(kb, fast, slo), diagnose_log(kb, slow, slo)
        assert a.as_json() == b.as_json()
        assert [f.cause for f in a.live.diagnosis.findings] == [f.cause for f in b.live.diagnosis.findings]
    assert held_as_columns >= 3  # the fast path did hold columns (else this compares lists with lists)
    readings = {r.name for r in log_readings(vllm.parse_chunks([texts[0].encode()]))}
    assert {"running_cap", "decode_during_prefill_ratio"} <= readings


def test_readings_from_columns_match_the_per_sample_formulas() -> None:
    """The readings' numpy code against their formulas written per Sample (as they were before the columns):
    lines with no running request or no prompt tokens are the ones a mask can get wrong."""
    import statistics

    from triage.sources.logs import vllm

    lines = [v1(s % 60, (s // 10) % 4 * 4, s % 3, 56.0 + (s // 10) % 41, p=float(s % 3) * 700,
                g=float((s // 10) % 5) * 300).replace("06:35:", f"06:{35 + s // 60}:") for s in range(0, 600, 10)]
    log = vllm.parse_chunks(["\n".join(lines).encode() + b"\n"])
    samples = list(log.samples)
    busy = [s for s in samples if s.running and s.gen_tps is not None and s.gen_tps > 0]
    assert 0 < len(busy) < len(samples)
    found = {r.name: r.value for r in log_readings(log)}
    assert found["decode_tok_per_s_per_request"] == sum(s.gen_tps or 0 for s in busy) / sum(s.running or 0
                                                                                              for s in busy)
    with_prefill = [(s.gen_tps or 0) / (s.running or 1) for s in busy if s.prompt_tps]
    without = [(s.gen_tps or 0) / (s.running or 1) for s in busy if s.prompt_tps == 0]
    ratio = statistics.fmean(with_prefill) / statistics.fmean(without)
    assert found.get("decode_during_prefill_ratio", ratio) == ratio
    kv = [s.kv for s in samples if s.kv is not None]
    assert found["kv_full_share"] == len([v for v in kv if v >= 0.95]) / len(kv)


@pytest.mark.parametrize(("name", "engine", "others"), [("vllm_v1_apiserver_kv_full.txt", "vllm", ("sglang", "tgi")),
                                                        ("sglang_decode_kv_full.txt", "sglang", ("vllm", "tgi"))])
def test_a_logs_first_action_is_for_the_engine_it_names(name: str, engine: str, others: tuple[str, ...]) -> None:
    """The log names its engine: the terminal gives that engine's first action, not every engine's flags."""
    out = run_triage("diagnose", REAL / name)
    actions = [line for line in out.stdout.splitlines() if "first action:" in line]
    assert out.returncode == 0 and actions, out.stdout
    assert all(f"{engine} --" in a and not any(f"{o} --" in a for o in others) for a in actions), actions
