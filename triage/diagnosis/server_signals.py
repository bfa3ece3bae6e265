"""Server-side signals from a metric window (scrapes or Prometheus), via the engine's metric map."""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

from triage.diagnosis.roofline import Hardware, add_server_roofline
from triage.diagnosis.signals import SignalSet
from triage.knowledge.loader import KnowledgeBase
from triage.knowledge.messages import Msg
from triage.knowledge.needs import Need
from triage.sources.readings import Readings

PCT = {"p50": 0.5, "p90": 0.9, "p99": 0.99}
DCGM = "dcgm"


def _q(key: str, q: float) -> Need:
    return Need("quantile", key, q)


NEEDS: list[Need] = [
    *[_q(k, q) for k in ("ttft", "tpot_req", "itl") for q in PCT.values()], _q("ttft", 0.05),
    _q("e2e", 0.5), _q("e2e", 0.99), _q("prompt_len", 0.5), _q("prompt_len", 0.99),
    Need("hist_mean", "ttft"), Need("hist_mean", "queue_time"), Need("hist_mean", "prefill_time"),
    Need("gauge_mean", "running"), Need("gauge_mean", "waiting"),
    Need("gauge_max", "kv_usage"), Need("gauge_mean", "kv_usage"),
    Need("rate", "preemptions"), Need("rate", "prefix_queries"), Need("rate", "prefix_hits"),
    Need("gauge_mean", "prefix_hit_rate"), Need("rate", "prompt_tokens"), Need("rate", "generation_tokens"),
    Need("rate", "spec_draft_tokens"), Need("rate", "spec_accepted_tokens"), Need("gauge_mean", "spec_accept_rate"),
    Need("rate", "request_success"), Need("info", "cache_config"), Need("info", "served_model"),
    Need("gauge_mean", "dram_active", engine=DCGM), Need("gauge_mean", "tensor_active", engine=DCGM),
    Need("info", "gpu_info", engine=DCGM),
]

TPOT_PER_REQUEST = _q("tpot_req", 0.5)
ITL_NEEDS = [_q("itl", q) for q in PCT.values()]
FIRST_NEEDS = [n for n in NEEDS if n not in ITL_NEEDS]  # what a window is asked first


def needs_itl(readings: Readings) -> bool:
    """The ITL quantiles stand in for TPOT only when the per-request TPOT histogram gave nothing (older engines),
    so they are read in a second round then, and not at all otherwise."""
    return readings.get(TPOT_PER_REQUEST) is None


@lru_cache(maxsize=256)
def _need(kind: str, key: str, q: float | None, engine: str) -> Need:
    """The Need of these fields, built once (a fleet reads the same few dozen needs for every replica)."""
    return Need(kind, key, q, engine)  # type: ignore[arg-type]


class _Reader:
    """Numbers from readings by need, None when the window could not answer."""

    def __init__(self, readings: Readings) -> None:
        self.r = readings

    def num(self, kind: str, key: str, q: float | None = None, engine: str = "") -> float | None:
        value = self.r.get(_need(kind, key, q, engine))
        return float(value) if isinstance(value, (int, float)) else None

    def info(self, key: str, engine: str = "") -> dict[str, str]:
        value = self.r.get(_need("info", key, None, engine))
        return value if isinstance(value, dict) else {}


def _div(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _latency(kb: KnowledgeBase, out: SignalSet, r: _Reader) -> None:
    per_request = r.num("quantile", "tpot_req", 0.5) is not None
    tpot_key, tpot_how = ("tpot_req", "server.tpot_req_hist") if per_request else ("itl", "server.itl_hist")
    for pname, q in PCT.items():
        out.put(kb, f"ttft_{pname}_s", r.num("quantile", "ttft", q), Msg("server.ttft_hist", p=pname))
        out.put(kb, f"tpot_{pname}_s", r.num("quantile", tpot_key, q), Msg(tpot_how, p=pname))
    for pname in ("p50", "p99"):
        out.put(kb, f"e2e_{pname}_s", r.num("quantile", "e2e", PCT[pname]), Msg("server.e2e_hist", p=pname))
    for metric in ("ttft", "tpot", "e2e"):
        top, bottom = out.get(f"{metric}_p99_s"), out.get(f"{metric}_p50_s")
        if top and bottom:
            out.put(kb, f"{metric}_tail_ratio", _div(top.value, bottom.value), Msg("tail_ratio", metric=metric))
    out.put(kb, "ttft_p5_s", r.num("quantile", "ttft", 0.05), Msg("server.ttft_hist", p="p5"))
    top, floor = out.get("ttft_p99_s"), out.get("ttft_p5_s")
    if top and floor:
        out.put(kb, "ttft_spread", _div(top.value, floor.value), Msg("server.ttft_over_p5", p="p99"))
    mid = out.get("ttft_p50_s")
    if mid and floor:
        out.put(kb, "ttft_median_over_floor", _div(mid.value, floor.value), Msg("server.ttft_over_p5", p="p50"))
    ttft_mean = r.num("hist_mean", "ttft")
    out.put(kb, "queue_share_of_ttft", _div(r.num("hist_mean", "queue_time"), ttft_mean), Msg("server.queue_share"))
    out.put(kb, "prefill_share_of_ttft", _div(r.num("hist_mean", "prefill_time"), ttft_mean),
            Msg("server.prefill_share"))
    out.put(kb, "prompt_tail_ratio", _div(r.num("quantile", "prompt_len", 0.99), r.num("quantile", "prompt_len", 0.5)),
            Msg("server.prompt_tail"))


def _capacity(kb: KnowledgeBase, out: SignalSet, r: _Reader) -> None:
    running = r.num("gauge_mean", "running")
    out.put(kb, "running_mean", running, Msg("server.running_mean"))
    out.put(kb, "waiting_mean", r.num("gauge_mean", "waiting"), Msg("server.waiting_mean"))
    out.put(kb, "kv_usage_max", r.num("gauge_max", "kv_usage"), Msg("server.kv_usage_max"))
    out.put(kb, "kv_usage_mean", r.num("gauge_mean", "kv_usage"), Msg("server.kv_usage_mean"))
    out.put(kb, "preemptions_per_s", r.num("rate", "preemptions"), Msg("server.preemptions"))
    config = r.info("cache_config")
    if config.get("enable_prefix_caching") in ("True", "False"):
        out.put(kb, "prefix_caching_enabled", config["enable_prefix_caching"] == "True",
                Msg("server.prefix_caching_label"))
    # batch_fill needs max_num_seqs, which vLLM does not export (kv_cache_max_concurrency counts
    # max_model_len-long sequences, so short requests overshoot it): left absent rather than guessed.


def _rates(kb: KnowledgeBase, out: SignalSet, r: _Reader) -> None:
    hits = _div(r.num("rate", "prefix_hits"), r.num("rate", "prefix_queries"))
    out.put(kb, "prefix_hit_rate", hits if hits is not None else r.num("gauge_mean", "prefix_hit_rate"),
            Msg("server.prefix_hits" if hits is not None else "server.prefix_hit_gauge"))
    accept = _div(r.num("rate", "spec_accepted_tokens"), r.num("rate", "spec_draft_tokens"))
    out.put(kb, "spec_acceptance", accept if accept is not None else r.num("gauge_mean", "spec_accept_rate"),
            Msg("server.spec_acceptance"))
    out.put(kb, "req_per_s", r.num("rate", "request_success"), Msg("server.finished_rate"))
    gen = r.num("rate", "generation_tokens")
    out.put(kb, "out_tok_per_s", gen, Msg("server.generated_rate"))
    out.put(kb, "prompt_to_output_ratio", _div(r.num("rate", "prompt_tokens"), gen),
            Msg("server.prompt_over_generated"))
    out.put(kb, "dram_active", r.num("gauge_mean", "dram_active", engine=DCGM), Msg("server.dram_active"))
    out.put(kb, "tensor_active", r.num("gauge_mean", "tensor_active", engine=DCGM),
            Msg("server.tensor_active"))


class RecordedSignals(SignalSet):
    """A server SignalSet in which the signals recording rules already computed (``values``, by signal) take the
    place of what the readings give: each is recorded where server_signals puts it, with ``source`` as its
    provenance (the message for that signal), whatever the readings hold (a fleet read skips the needs of recorded
    signals)."""

    def __init__(self, recorded: dict[str, float], source: Callable[[str], Msg]) -> None:
        super().__init__("server")
        self.recorded, self.recorded_source = recorded, source

    def put(self, kb: KnowledgeBase, name: str, value: float | bool | None, source: Msg) -> None:
        if name in self.recorded:
            value = self.recorded[name]
            if kb.signals[name].unit == "bool" and value == value:
                value = bool(value)
            source = self.recorded_source(name)
        super().put(kb, name, value, source)

    def complete(self, kb: KnowledgeBase) -> None:
        """Add the recorded signals server_signals had no occasion to put (a signal the tree declares)."""
        for name in self.recorded:
            if name not in self.values and name in kb.signals:
                self.put(kb, name, None, self.recorded_source(name))


def server_signals(kb: KnowledgeBase, readings: Readings, hardware: Hardware | None = None,
                   out: SignalSet | None = None) -> SignalSet:
    """Every server-side signal the window could answer; the rest stay absent (not measurable). ``out`` (e.g.
    RecordedSignals) receives them instead of a new set."""
    out = SignalSet("server") if out is None else out
    r = _Reader(readings)
    _latency(kb, out, r)
    _capacity(kb, out, r)
    _rates(kb, out, r)
    add_server_roofline(kb, out, r.info("served_model").get("model_name"), r.info("cache_config"),
                        r.info("gpu_info", engine=DCGM).get("modelName"), hardware)
    return out
