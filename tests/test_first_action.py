"""The first action per cause and engine (tree.yaml) and the verdict built from it: every flag is one of the
engine's own parser dump, no first action is a technique the engine already runs by default, techniques on by
default rank last, and a verdict never calls an unmeasured source healthy."""

from __future__ import annotations

import shlex

import pytest

from triage.diagnosis.rules import Diagnosis, diagnose, resolve_slo
from triage.diagnosis.signals import SignalSet
from triage.diagnosis.verdict import engine_id, ranked_techniques, verdict
from triage.knowledge.knobs import Dump, check_argv, load_dump
from triage.knowledge.loader import load_knowledge

KB = load_knowledge()
ENGINES = KB.knob_engines  # the engines every first action covers (tree/engines/*.yaml knobs_required)
CAUSES = [c for c in KB.causes.values() if c.rule is not None]


def _dump(engine: str) -> Dump:
    """The dump of the engine version the techniques were checked against (one version per engine)."""
    versions = {t.verified[engine] for t in KB.techniques.values()}  # type: ignore[index]
    assert len(versions) == 1, versions
    return load_dump(engine, versions.pop())


def _tokens(command: str) -> tuple[list[tuple[str, str]], list[str]]:
    """(NAME=VALUE assignments, the rest) of a first action as typed."""
    words = shlex.split(command)
    env = [tuple(w.split("=", 1)) for w in words if "=" in w and not w.startswith("-")]
    return env, [w for w in words if not ("=" in w and not w.startswith("-"))]  # type: ignore[return-value]


def _sets(dump: Dump, command: str) -> set[tuple[str, str | None]]:
    """What a command sets: (parser destination, value) per option — ``--enable-x`` and ``--disable-x`` share a
    destination, a switch without a value is (dest, None) — and (name, None) per environment variable."""
    env, argv = _tokens(command)
    out: set[tuple[str, str | None]] = {(name, None) for name, _ in env}
    for i, word in enumerate(argv):
        if word.startswith("-"):
            entry, _ = dump.resolve(word.split("=", 1)[0])
            if entry is not None:
                value = argv[i + 1] if entry.get("takes_value") and i + 1 < len(argv) else None
                out.add((entry["dest"], value))
    return out


def _turns_off(action: set[tuple[str, str | None]], switch: set[tuple[str, str | None]]) -> bool:
    """The action touches a switch: the same boolean option or variable, or the same option set to its value
    (``--chunked-prefill-size -1`` turns chunking off; ``--chunked-prefill-size 16384`` tunes it)."""
    return any(d == sd and (sv is None or v is None or v == sv) for d, v in action for sd, sv in switch)


def test_every_cause_with_a_rule_has_a_first_action():
    assert CAUSES and all(c.first_action is not None for c in CAUSES)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("cause", [c.id for c in CAUSES])
def test_first_action_flags_are_the_engines_own(cause: str, engine: str):
    action = KB.causes[cause].first_action
    assert action is not None
    command = action.command(engine)
    if action.cluster:  # a fleet cause: the deployment's or the router's command, no engine flag
        assert not any(w in command for w in ("--max-num-seqs", "--max-running-requests"))
        return
    if action.client:  # the load's concurrency: no engine flag, and the sentence says so
        assert not any(w in command for w in ("--max-num-seqs", "--max-running-requests"))
        return
    dump = _dump(engine)
    env, argv = _tokens(command)
    assert argv or env, command
    assert not check_argv(dump, tuple(argv)), (cause, engine, check_argv(dump, tuple(argv)))
    assert all(w.startswith("-") or argv[i - 1].startswith("-") for i, w in enumerate(argv)), command
    assert all(name in dump.env for name, _ in env), (cause, engine, env)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("cause", [c.id for c in CAUSES])
def test_first_action_is_not_a_technique_already_on(cause: str, engine: str):
    """Neither a default-on technique's switch (``--enable-prefix-caching`` shares its destination with
    ``--disable-prefix-caching``) nor, in the verdict, a technique the engine runs by default."""
    action = KB.causes[cause].first_action
    assert action is not None
    on = {tid: t.knobs[engine] for tid, t in KB.techniques.items() if t.knobs[engine].default_on}  # type: ignore[index]
    assert {"paged_attention", "continuous_batching", "prefix_caching", "chunked_prefill"} <= set(on)
    dump = _dump(engine)
    assert _turns_off(_sets(dump, "--enable-chunked-prefill"), _sets(dump, "--disable-chunked-prefill")) \
        if engine == "vllm" else True  # the check catches the on switch of a default-on technique
    if action.client or action.cluster:
        return
    sets = _sets(dump, action.command(engine))
    for tid, knobs in on.items():
        if knobs.off_switch:
            assert not _turns_off(sets, _sets(dump, knobs.off_switch)), (cause, engine, tid, action.command(engine))
    for tid in on:  # nor does the sentence tell the reader to turn one on
        title = KB.techniques[tid].short.lower()
        assert f"enable {title}" not in action.sentence(engine).en.lower()


@pytest.mark.parametrize("engine", ENGINES)
def test_off_switches_are_the_engines_own(engine: str):
    dump = _dump(engine)
    for tid, tech in KB.techniques.items():
        knobs = tech.knobs[engine]  # type: ignore[index]
        if not knobs.off_switch:
            continue
        env, argv = _tokens(knobs.off_switch)
        assert not check_argv(dump, tuple(argv)), (tid, knobs.off_switch)
        assert all(name in dump.env for name, _ in env), (tid, knobs.off_switch)


@pytest.mark.parametrize("engine", [*ENGINES, None])
def test_techniques_already_on_rank_after_the_ones_that_change_something(engine: str | None):
    for cause in CAUSES:
        ranked = ranked_techniques(KB, [t.id for t in cause.techniques], engine)
        flags = [r.default_on for r in ranked]
        assert flags == sorted(flags), (cause.id, ranked)
    kv = ranked_techniques(KB, ["paged_attention", "kv_cache_quantization", "pd_disaggregation"], engine)
    assert kv[0].id == "kv_cache_quantization" and kv[-1].id == "paged_attention" and kv[-1].default_on
    queue = ranked_techniques(KB, ["continuous_batching", "scale_out", "pd_disaggregation"], engine)
    assert queue[0].id == "scale_out" and queue[-1].id == "continuous_batching"


def _signals(**values: float) -> SignalSet:
    out = SignalSet("server")
    for name, value in values.items():
        out.put(KB, name, value, "test")
    return out


def _diag(**values: float) -> Diagnosis:
    return diagnose(KB, _signals(**values), resolve_slo(KB))


@pytest.mark.parametrize("engine", ENGINES)
def test_verdict_of_kv_pressure_names_the_knob_not_paged_attention(engine: str):
    diag = _diag(ttft_p99_s=5.0, ttft_p50_s=0.6, kv_usage_max=0.99, waiting_mean=6.0, preemptions_per_s=0.8,
                 queue_share_of_ttft=0.8)
    v = verdict(KB, diag, engine)
    assert v.state == "finding" and v.cause == "memory.kv_cache" and v.confidence
    assert [a.engine for a in v.actions] == [engine]
    assert "paged" not in v.actions[0].command.lower()
    assert v.actions[0].command == {"vllm": "--gpu-memory-utilization 0.95", "sglang": "--mem-fraction-static 0.9",
                                    "tgi": "--kv-cache-dtype fp8_e4m3fn"}[engine]
    assert [e.signal for e in v.deciding][:1] == ["kv_usage_max"] and all(e.holds for e in v.deciding)
    assert "paged_attention" in [r.id for r in v.already_on]


def test_verdict_without_an_engine_gives_each_engines_action():
    diag = _diag(ttft_p99_s=5.0, ttft_load_corr=0.9, queue_share_of_ttft=0.9, waiting_mean=4.0)
    v = verdict(KB, diag, None)
    assert v.cause == "ttft.queueing" and [a.engine for a in v.actions] == list(ENGINES)
    assert v.actions[0].command == "--max-num-seqs 512"


def test_verdict_is_healthy_only_when_every_symptom_was_measured():
    partial = verdict(KB, _diag(ttft_p99_s=0.2, tpot_p99_s=0.02), "vllm")
    assert partial.state == "partly_measured" and partial.symptoms  # the unmeasured symptoms are named
    assert all(e.holds is False for e in partial.deciding) and partial.deciding
    nothing = verdict(KB, _diag(), "vllm")
    assert nothing.state == "not_measurable" and not nothing.actions
    empty = verdict(KB, Diagnosis(SignalSet("server"), resolve_slo(KB), [], [], empty="no samples"), None)
    assert empty.state == "empty" and empty.reason == "no samples"


def test_engine_ids_from_what_a_file_calls_its_backend():
    assert engine_id("sglang-oai") == "sglang" and engine_id("vllm") == "vllm" and engine_id("tgi") == "tgi"
    assert engine_id("openai-chat") is None and engine_id(None) is None and engine_id("vllmx") is None


def test_live_kv_pressure_puts_the_knob_first_and_paged_attention_last():
    """On Live (demo, KV-cache pressure, engine vLLM) the verdict and the top finding's card name the knob that
    acts; the card lists PagedAttention after the techniques that change something, marked as already on. On
    the old code 'What to try first' opened with PagedAttention and named no flag."""
    from tests.apptest_tools import open_page, texts

    at = open_page("pages/live.py", source="demo", scenario="kv_pressure")
    assert at.session_state["findings"][0] == "memory.kv_cache"
    page = texts(at)
    assert "**First action** (vLLM): `--gpu-memory-utilization 0.95`" in page
    assert page.count("--gpu-memory-utilization 0.95") >= 2  # the verdict and the finding's card
    labels = [link.proto.label for link in at.get("page_link")]
    first_card = labels[:3]
    assert first_card[0] == "Open the KV-cache quant page" and first_card[-1] == "Open the PagedAttention page"
    assert "↑ already on by default in vLLM — check it is not disabled" in page


def test_cli_text_and_markdown_report_name_the_first_action_and_rank_default_on_last():
    from triage.report.markdown import findings_markdown
    from triage.report.text import diagnosis_text

    diag = _diag(ttft_p99_s=5.0, ttft_p50_s=0.6, kv_usage_max=0.99, waiting_mean=6.0, preemptions_per_s=0.8,
                 queue_share_of_ttft=0.8)
    text = diagnosis_text(KB, diag, [])
    assert "first action: vllm --gpu-memory-utilization 0.95 · sglang --mem-fraction-static 0.9" in text
    kv_line = next(line for line in text.splitlines() if "try, minimal change first" in line and "Paged" in line)
    assert kv_line.rstrip().endswith("(config, already on by default)") and kv_line.index("KV-cache") < \
        kv_line.index("PagedAttention")
    md = "\n".join(findings_markdown(KB, diag))
    assert "First action: vllm `--gpu-memory-utilization 0.95`" in md
    assert md.index("**KV-cache quantization") < md.index("**PagedAttention")
    assert "(config, already on by default: check it is not disabled)" in md


def test_a_note_under_an_unmeasured_symptom_is_not_called_within_the_slo():
    """Evidence for a cause whose symptom this source cannot measure: the verdict names that symptom as
    unmeasured rather than saying the service is within the SLO."""
    diag = _diag(ttft_p99_s=0.2, tpot_p99_s=0.02, batch_fill=0.1, kv_usage_mean=0.05, waiting_mean=0.0)
    v = verdict(KB, diag, "vllm")
    assert (v.state, v.cause, v.symptom) == ("note", "throughput.low_batch_utilization", "throughput")
    assert "throughput" in v.symptoms and "ttft" not in v.symptoms  # the component then says "cannot be measured"
    assert v.actions[0].client and v.actions[0].command == "--max-concurrency 64"


def test_fleet_first_actions_are_the_clusters_not_the_clients():
    """Scaling out or fixing the routing is done on the deployment or the router: the verdict said 'on the client'
    for them while they were flagged as the load's."""
    from triage.service.verdict import first_actions

    fleet = [c for c in CAUSES if c.id.startswith("fleet.")]
    assert fleet
    for cause in fleet:
        actions = first_actions(KB, cause.id, "vllm")
        assert actions and actions[0].cluster and not actions[0].client, cause.id
    assert not any(c.first_action.cluster for c in CAUSES if not c.id.startswith("fleet.") and c.first_action)
