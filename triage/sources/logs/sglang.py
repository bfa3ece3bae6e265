"""SGLang server logs: the scheduler's ``Prefill batch`` / ``Decode batch`` lines and its retraction messages.

Formats, read from SGLang's scheduler (``srt/managers/scheduler.py``, later ``scheduler_metrics_mixin.py``):
- "Prefill batch. #new-seq: N, #new-token: N, #cached-token: N, [cache hit rate: x%, ]token usage: 0.xx,
  #running-req: N, #queue-req: N, " (older: "Prefill batch(mixed #running-req: N). …", "#inflight-req"); newer
  use "Prefill batch, " and may print "page usage", "full token usage" / "swa token usage" (hybrid models),
  "input throughput (token/s)".
- "Decode batch. #running-req: N, #token: N, token usage: 0.xx, [accept len: x, ][cuda graph: B, ]gen throughput
  (token/s): x, #queue-req: N, " (newer "Decode batch, ", "#full token", "full token usage").
- Retraction (SGLang's preemption): "KV cache pool is full. Retract requests. #retracted_reqs: N, …" and
  "Decode out of memory happened. #retracted_reqs: N, …" (older "decode out of memory happened, …").
Each line starts "[YYYY-MM-DD HH:MM:SS( DPn)?( TPn)?] "; only TP rank 0 prints the batch lines (every rank
prints a retraction, so only rank 0's are counted).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from triage.sources.logs.lines import Clock
from triage.sources.logs.registry import LogFormat, register
from triage.sources.logs.series import LogSeries, Sample, Timeline

BATCH = re.compile(rb"(Prefill|Decode) batch[.,(]")
FIELD = re.compile(rb"(#running-req|#queue-req|full token usage|swa token usage|token usage|page usage|"
                   rb"gen throughput \(token/s\)|input throughput \(token/s\)|#new-token|#cached-token|#new-seq|"
                   rb"accept len|accept rate): ([\d.]+)")
RETRACT = re.compile(rb"(?:Retract requests\.|[Dd]ecode out of memory happened[.,]) #retracted_reqs: (\d+)")
RANKS = re.compile(rb"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?: DP(\d+))?(?: TP(\d+))?")
OOM = re.compile(rb"(?:CUDA out of memory|torch\.OutOfMemoryError|OutOfMemoryError)")
MAX_RUNNING = re.compile(rb"max_running_requests=(\d+)")
SIGNATURE = re.compile(rb"(?:Prefill|Decode) batch[.,(].{0,40}#(?:new-seq|running-req)")


def detect(head: bytes) -> bool:
    """An SGLang server log: its scheduler's batch lines (printed as soon as any request runs)."""
    return SIGNATURE.search(head) is not None


class SglangLogParser:
    """Feed lines one at a time, then ``result()``; holds only the numbers."""

    def __init__(self) -> None:
        self.clock = Clock()
        self.series = LogSeries("sglang_log", "SGLang server log", "sglang", 1.0)
        self.series.preemptions_logged = True  # every retraction is logged at INFO
        self.new_tokens = self.cached_tokens = 0.0
        self.times = Timeline(self.series)

    def _time(self, line: bytes) -> float:
        return self.times.place(self.clock.stamp(line))

    def feed(self, line: bytes) -> None:
        s = self.series
        s.lines += 1
        ranks = RANKS.search(line)
        dp, tp = (ranks.group(1), ranks.group(2)) if ranks else (None, None)
        if b"batch" in line and (m := BATCH.search(line)):
            if tp not in (None, b"0"):
                s.skipped += 1  # another tensor-parallel rank repeating rank 0's numbers
                return
            self._batch(line, m, (dp or b"0").decode())
        elif b"retracted_reqs" in line and (r := RETRACT.search(line)):
            if tp in (None, b"0"):
                s.retractions += int(r.group(1))
        elif b"emory" in line and OOM.search(line):
            s.oom_lines += 1
        elif b"max_running_requests=" in line and (mr := MAX_RUNNING.search(line)):
            s.config["max_num_seqs"] = float(mr.group(1))
        else:
            s.skipped += 1

    def _batch(self, line: bytes, m: re.Match[bytes], engine: str) -> None:
        fields: dict[bytes, float] = {}
        for name, value in FIELD.findall(line, m.end()):
            try:
                fields.setdefault(name, float(value))
            except ValueError:
                continue
        if b"#running-req" not in fields and b"#queue-req" not in fields:
            self.series.skipped += 1  # cut before its numbers
            return
        kv = fields.get(b"full token usage", fields.get(b"token usage", fields.get(b"page usage")))
        prefill = m.group(1) == b"Prefill"
        if prefill:
            self.new_tokens += fields.get(b"#new-token", 0.0)
            self.cached_tokens += fields.get(b"#cached-token", 0.0)
        sample = Sample(self._time(line), None, None if prefill else fields.get(b"gen throughput (token/s)"),
                        fields.get(b"#running-req"), fields.get(b"#queue-req"), None, kv, None, None)
        self.series.group(engine).append(sample)
        self.series.stats_lines += 1

    def result(self) -> LogSeries:
        s = self.series
        s.prompt_tokens = self.new_tokens
        total = self.new_tokens + self.cached_tokens
        s.prefix_hit_total = self.cached_tokens / total if total > 0 else None
        s.settle()
        return s


def parse(lines: Iterable[bytes]) -> LogSeries:
    parser = SglangLogParser()
    for line in lines:
        parser.feed(line)
    return parser.result()


register(LogFormat("sglang_log", "SGLang server log", detect, parse, rank=20))
