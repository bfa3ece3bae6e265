"""Console tables of genai-perf, AIPerf and GuideLLM, as pasted from a terminal.

Read from the tools' own printing code. genai-perf (``genai_perf/export_data/console_exporter.py``) and AIPerf
(``aiperf/exporters/console_metrics_exporter.py``) print one rich ``Table`` titled "NVIDIA GenAI-Perf | LLM
Metrics" / "NVIDIA AIPerf | LLM Metrics": a header row "Statistic" (genai-perf) or "Metric" (AIPerf) then "avg min
max p99 p90 p75" (AIPerf: "… p50 std"), one row per metric labelled "<Name Title-Cased> (<unit>)"; a label longer
than the column (36 / 30 characters) wraps onto a next row whose value cells are empty; scalar rows (throughput,
count) hold "N/A" outside "avg". GuideLLM (``guidellm/utils/console.py`` ``print_table``, 0.4 and later) prints
tables between "|===|" rules: up to three header rows (group, name, statistic) where a header spanning several
columns is followed by empty cells ("||"), a "|---|" rule, then one row per benchmark whose first cell is the
strategy; tables "Run Summary Info", "Request Token Statistics", "Request Latency Statistics" (Request Latency Sec,
TTFT ms, ITL ms, TPOT ms; Mdn / p95) and "Server Throughput Statistics" (Requests Concurrency / Per Sec, token
Per Sec; Mdn / Mean). A table cut short keeps the rows and cells it has; a row cut mid-line keeps its complete cells.
"""

from __future__ import annotations

import re
from typing import Any

from triage.run import Run
from triage.sources.files import aiperf
from triage.sources.files import guidellm as guidellm_json
from triage.sources.files.common import Ctx, build_run, num
from triage.sources.files.genai_perf import TPOT_DEF, metric_summary, tag_of

RICH_TITLE = re.compile(r"NVIDIA (GenAI-Perf|AIPerf) \|")
RICH_EDGES = "│┃|"
RICH_HEADER = re.compile(r"^\s*[┃│|]\s*(Statistic|Metric)\s*[┃│|]\s*avg\s*[┃│|]", re.MULTILINE)
GUIDE_RULE = re.compile(r"^\s*\|=+(\|=+)*\|\s*$")
GUIDE_DASH = re.compile(r"^\s*\|-+(\|-+)*\|\s*$")
GUIDE_HEADER = re.compile(rb"^\s*\| Benchmark\s+\|", re.MULTILINE)
GUIDE_TITLE = re.compile(r"^\s*(?:ℹ\s*)?([A-Z][A-Za-z /()-]*(?:Statistics|Info)[A-Za-z ()-]*?)\s*$")
STATS = {"mdn": "p50", "p50": "p50", "mean": "mean", "p90": "p90", "p95": "p95", "p99": "p99"}
LATENCY = {"request latency": "e2e", "ttft": "ttft", "time to first token": "ttft", "itl": "tpot",
           "inter token latency": "tpot"}  # GuideLLM's ITL is each request's mean gap (= vLLM TPOT); its TPOT
#                                            includes TTFT (guidellm.TPOT_V4) and is not read
PER_SEC = {"requests": "req_per_s", "output tokens": "out_tok_per_s", "total tokens": "total_tok_per_s"}
LENGTHS = {"input tok": "prompt_tokens_mean", "output tok": "output_tokens_mean"}


def detect(data: bytes) -> str | None:
    """'genai_perf', 'aiperf' or 'guidellm' when the text holds that tool's console table."""
    head = data[:262144].decode("utf-8", "replace")
    title = RICH_TITLE.search(head)
    if title and RICH_HEADER.search(head):
        return "genai_perf" if title.group(1) == "GenAI-Perf" else "aiperf"
    if RICH_HEADER.search(head):
        return "aiperf" if re.search(r"[┃│|]\s*Metric\s*[┃│|]", head) else "genai_perf"
    if GUIDE_HEADER.search(data[:262144]) and "|===" in head:
        return "guidellm"
    return None


# ---------------------------------------------------------------- genai-perf and AIPerf (rich tables)


def _cells(line: str) -> tuple[list[str], bool]:
    """The cells of a table row and whether the row is complete (ends with its edge; a cut row does not)."""
    body = line.strip()
    complete = len(body) > 1 and body[-1] in RICH_EDGES
    parts = re.split(r"[│┃|]", body)
    return [p.strip() for p in parts[1:-1]], complete  # a cut row's last part is partial: left out like an edge


def _rich_rows(text: str) -> tuple[list[str], list[tuple[str, list[str]]]]:
    header: list[str] = []
    rows: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped[0] not in RICH_EDGES:
            if header and rows and stripped.startswith("└"):
                break  # the table's bottom edge
            continue
        cells, _ = _cells(stripped)
        if not cells:
            continue
        if not header:
            if cells[0] in ("Statistic", "Metric") and len(cells) > 1 and cells[1].lower() == "avg":
                header = [c.lower() for c in cells[1:]]
            continue
        label, values = cells[0], cells[1:]
        if rows and label and not any(values):
            rows[-1] = (f"{rows[-1][0]} {label}", rows[-1][1])  # a wrapped label, or its unit on the next line
        elif label:
            rows.append((label, values))
    return header, rows


def parse_rich(text: str, ctx: Ctx, tool: str) -> list[Run]:
    header, rows = _rich_rows(text)
    if not header:
        raise ctx.fail(f"no '{'Statistic' if tool == 'genai_perf' else 'Metric'} | avg | …' header row")
    metrics: dict[str, dict[str, Any]] = {}
    for label, values in rows:
        tag, unit = tag_of(label)
        stats: dict[str, Any] = {"unit": unit}
        stats.update({h: v for h, v in zip(header, values, strict=False) if num(v) is not None})
        metrics.setdefault(tag, stats)
    if not metrics:
        raise ctx.fail("the table has a header but no metric row (cut before its first row?)")
    summary = metric_summary(metrics)
    meta: dict[str, Any] = {"tool": "genai-perf console" if tool == "genai_perf" else "AIPerf console"}
    if (goodput := num(metrics.get("request_goodput", {}).get("avg"))) is not None:
        meta["goodput"] = goodput
    missing = [name for name, key in (("TTFT", "ttft_mean_s"), ("request latency", "e2e_mean_s"),
                                      ("request throughput", "req_per_s")) if key not in summary]
    if missing:
        ctx.notes.append(f"the table has no {', '.join(missing)} row (cut short, or a non-streaming run): not "
                         "measurable")
    defs = {"tpot": TPOT_DEF.format(tool="genai-perf")} if tool == "genai_perf" else dict(aiperf.DEFINITIONS)
    label = "genai-perf console summary" if tool == "genai_perf" else "AIPerf console summary"
    return [build_run(label, ctx, tool=summary, definitions=defs, meta=meta)]


# ---------------------------------------------------------------- GuideLLM


def _split(line: str) -> tuple[list[str], bool]:
    """GuideLLM cells, keeping '' where a spanning header leaves a column out (``||``)."""
    body = line.strip()
    complete = body.endswith("|") and len(body) > 1
    parts = body.split("|")[1:-1]  # complete: the part after the edge; cut mid-line: the last, partial cell
    return [p if not p.strip() else p.strip() for p in parts], complete


def _columns(headers: list[list[str]], width: int) -> list[tuple[str, ...]]:
    """Per column, its (group, name, statistic) with a spanning header carried over the columns it spans."""
    out: list[list[str]] = [[] for _ in range(width)]
    for row in headers:
        carried = ""
        for i in range(width):
            cell = row[i] if i < len(row) else ""
            if cell == "":  # zero-width: spanned by the header on its left
                value = carried
            else:
                value = cell.strip()
                carried = value
            out[i].append(value.lower())
    return [tuple(c) for c in out]


def _tables(text: str) -> list[tuple[str, list[tuple[str, ...]], list[list[str]]]]:
    """(title, columns, value rows) of every GuideLLM table in the text."""
    tables = []
    title = ""
    state = "out"
    headers: list[list[str]] = []
    rows: list[list[str]] = []
    for line in text.splitlines():
        stripped = line.strip()
        if state == "out":
            if m := GUIDE_TITLE.match(line):
                title = m.group(1)
            elif GUIDE_RULE.match(line):
                state, headers, rows = "header", [], []
            elif stripped.startswith("| Benchmark"):  # a second table stacked under the first's rule
                state, headers, rows = "header", [_split(line)[0]], []
            continue
        if state == "header":
            if GUIDE_DASH.match(line):
                state = "rows"
            elif GUIDE_RULE.match(line):
                headers = []
            elif stripped.startswith("|"):
                headers.append(_split(line)[0])
            else:
                state = "out"
            continue
        if GUIDE_RULE.match(line) or not stripped.startswith("|"):
            tables.append((title, _columns(headers, max(map(len, headers), default=0)), rows))
            state = "out"
            continue
        cells, _ = _split(line)
        if cells:
            rows.append([c.strip() for c in cells])
    if state == "rows":
        tables.append((title, _columns(headers, max(map(len, headers), default=0)), rows))  # cut before its rule
    return tables


def _reading(column: tuple[str, ...], value: float) -> tuple[str, float] | None:
    """A (summary key, value) for one GuideLLM cell, or None for a column no rule reads."""
    group, name, stat = (column + ("", "", ""))[:3]
    if not stat and name in STATS:  # two header rows (group, statistic), e.g. the docs' "(ms)" groups
        group, name, stat = group, "", name
    stat_key = STATS.get(stat)
    base = re.sub(r"\s*\((ms|sec|s)\)$", "", group)
    unit = "ms" if "(ms)" in group or name == "ms" else "s"
    if base in LATENCY and stat_key:
        return f"{LATENCY[base]}_{stat_key}_s", value / 1000.0 if unit == "ms" else value
    if name == "per sec" and base in PER_SEC and stat == "mean":
        return PER_SEC[base], value
    if base in LENGTHS and name == "per req" and stat == "mdn":
        return LENGTHS[base], value
    if base == "timings" and name == "dur":
        return "duration_s", value
    return None


def parse_guidellm(text: str, ctx: Ctx) -> list[Run]:
    tables = [t for t in _tables(text) if t[1] and t[1][0][0] == "benchmark"]
    if not tables:
        raise ctx.fail("no GuideLLM table ('| Benchmark |' header between '|===|' rules)")
    count = max(len(rows) for _, _, rows in tables)
    if not count:
        raise ctx.fail("the GuideLLM tables have headers but no benchmark row (cut before the first?)")
    summaries: list[dict[str, float]] = [{} for _ in range(count)]
    metas: list[dict[str, Any]] = [{"tool": "GuideLLM console"} for _ in range(count)]
    strategies = [""] * count
    for _title, columns, rows in tables:
        for i, row in enumerate(rows):
            strategies[i] = strategies[i] or row[0]
            for column, cell in zip(columns[1:], row[1:], strict=False):
                value = num(cell)
                if value is None:
                    continue
                if column[:3] == ("requests", "concurrency", "mean"):
                    metas[i]["mean concurrency"] = cell
                elif (read := _reading(column, value)) is not None:
                    summaries[i].setdefault(*read)
    runs = []
    for i, (summary, meta, strategy) in enumerate(zip(summaries, metas, strategies, strict=True), start=1):
        rate = re.search(r"@\s*(\d+(?:\.\d+)?)", strategy)
        if rate:
            summary["offered_rate"] = float(rate.group(1))
        label = f"{i}. {strategy}" if count > 1 else (strategy or "GuideLLM console summary")
        runs.append(build_run(label, ctx, tool=summary, meta=meta, key=f"benchmark {i}" if count > 1 else "",
                              definitions={"tpot": guidellm_json.TPOT_V4, "itl": guidellm_json.ITL_NONE}))
    return runs
