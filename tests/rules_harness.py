"""Test harness for the rule export: promtool unit tests generated from simulator history, VictoriaMetrics
single-node loaded from promtool-built blocks (vmctl), and vmalert -replay over it."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import requests
import yaml

from tests.prom_harness import PromServer, free_port, serve_tsdb, stop_process

PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"
VICTORIA = shutil.which("victoria-metrics") or "/usr/bin/victoria-metrics"
VMCTL = shutil.which("vmctl") or "/usr/bin/vmctl"
VMALERT = shutil.which("vmalert") or "/usr/bin/vmalert"
SCRIPT = shutil.which("script") or "/usr/bin/script"
READY_DEADLINE = 30.0
SAMPLE_RE = re.compile(r"^(?P<series>[^\s{]+(?:\{.*\})?) (?P<value>\S+) (?P<ts>\S+)$")


def have_victoria() -> bool:
    return all(Path(p).exists() for p in (VICTORIA, VMCTL, VMALERT, SCRIPT))


# ---------------------------------------------------------------- recording rules evaluated into TSDB blocks

RECORD_REF_RE = re.compile(r"\btriage:[A-Za-z0-9_]+:[0-9]+[smhd]\b")


def recording_passes(rule_file: Path) -> list[list[dict]]:
    """The recording rules of a rule file in dependency order: first those that read raw series only, then those
    that read what the earlier passes record (promtool evaluates a rule against a Prometheus that must already
    hold every series it reads)."""
    rules = [r for g in yaml.safe_load(rule_file.read_text())["groups"] for r in g["rules"] if "record" in r]
    passes: list[list[dict]] = []
    done: set[str] = set()
    while rules:
        ready = [r for r in rules if set(RECORD_REF_RE.findall(r["expr"])) <= done]
        if not ready:
            raise ValueError(f"recording rules read each other in a cycle: {[r['record'] for r in rules]}")
        passes.append(ready)
        done |= {r["record"] for r in ready}
        rules = [r for r in rules if r not in ready]
    return passes


def serve_with_recorded(folder: Path, data: Path, rule_file: Path, start: int, end: int, interval: str = "60s",
                        serve: Callable[[Path, Path, int], PromServer] = serve_tsdb) -> PromServer:
    """A Prometheus over ``data`` plus the recording rules of ``rule_file`` evaluated by
    ``promtool tsdb create-blocks-from rules`` over [start, end], pass by pass (each pass against a Prometheus
    holding the blocks of the earlier ones). Every pass is written to the same file path, so promtool gives each
    the same evaluation offset (the group's name and file hash): every rule has a sample at the same times, as
    when one Prometheus evaluates the group."""
    passes = recording_passes(rule_file)
    step = folder / "recording-pass.yml"
    for rules in passes:
        step.write_text(yaml.safe_dump({"groups": [{"name": "inference-triage", "interval": interval,
                                                     "rules": rules}]}, sort_keys=False, width=10**6))
        out = folder / "recording-blocks"
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir()
        server = serve_tsdb(folder, data, end)
        try:
            done = subprocess.run([PROMTOOL, "tsdb", "create-blocks-from", "rules", f"--start={start}",
                                   f"--end={end}", f"--url={server.url}", f"--output-dir={out}",
                                   f"--eval-interval={interval}", str(step)],
                                  capture_output=True, text=True, timeout=600)
        finally:
            server.stop()
        if done.returncode:
            raise RuntimeError(f"promtool create-blocks-from rules failed: {done.stderr[-2000:]}")
        for block in out.iterdir():
            if (block / "meta.json").exists():
                shutil.move(str(block), str(data / block.name))
    return serve(folder, data, end)


# ---------------------------------------------------------------- promtool test rules


def openmetrics_series(text: str) -> tuple[dict[str, list[tuple[float, str]]], float]:
    """Series → [(timestamp, value)] from an OpenMetrics file written by write_openmetrics; and the first time."""
    series: dict[str, list[tuple[float, str]]] = {}
    first = float("inf")
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = SAMPLE_RE.match(line)
        if m is None:
            raise ValueError(f"unexpected OpenMetrics line: {line[:120]}")
        ts = float(m.group("ts"))
        first = min(first, ts)
        series.setdefault(m.group("series"), []).append((ts, m.group("value")))
    return series, first


def promtool_test_file(rule_file: Path, openmetrics: str, step: int, firing: Iterable[dict[str, str]],
                       alert_names: Iterable[str], evaluation_interval: str = "1m") -> dict:
    """A ``promtool test rules`` file: the simulator's samples as input series (time 0 = the first sample); at the
    last sample, ALERTS{alertstate="firing"} must be exactly ``firing`` (label sets), and every other alert
    name must not fire."""
    series, first = openmetrics_series(openmetrics)
    inputs = []
    last = 0
    for name, points in series.items():
        points.sort()
        slots: dict[int, str] = {round((ts - first) / step): v for ts, v in points}
        last = max(last, max(slots))
        values = " ".join(slots.get(i, "_") for i in range(max(slots) + 1))
        inputs.append({"series": name, "values": values})
    at = f"{last * step}s"
    expected = [{"labels": "ALERTS{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}", "value": 1}
                for labels in firing]
    fired = {labels["alertname"] for labels in firing}
    quiet = [{"eval_time": at, "alertname": name, "exp_alerts": []} for name in alert_names if name not in fired]
    test = {"interval": f"{step}s", "input_series": inputs,
            "promql_expr_test": [{"expr": 'ALERTS{alertstate="firing"}', "eval_time": at, "exp_samples": expected}]}
    if quiet:
        test["alert_rule_test"] = quiet
    return {"rule_files": [str(rule_file)], "evaluation_interval": evaluation_interval, "tests": [test]}


def run_promtool_test(folder: Path, test: dict) -> subprocess.CompletedProcess:
    path = folder / "rules_test.yml"
    path.write_text(yaml.safe_dump(test, sort_keys=False, width=10**6), encoding="utf-8")
    return subprocess.run([PROMTOOL, "test", "rules", str(path)], capture_output=True, text=True, timeout=300)


# ---------------------------------------------------------------- VictoriaMetrics single-node


@dataclass
class VictoriaServer:
    url: str
    process: subprocess.Popen
    folder: Path
    log: Path = field(default_factory=Path)

    def stop(self) -> None:
        stop_process(self.process)

    def flush(self) -> None:
        """Make just-written samples searchable (VictoriaMetrics buffers them about a second otherwise)."""
        requests.get(self.url + "/internal/force_flush", timeout=10)

    def count_series(self, selector: str) -> int:
        self.flush()
        got = requests.get(self.url + "/api/v1/series", params={"match[]": selector, "start": "0"}, timeout=10)
        got.raise_for_status()
        return len(got.json()["data"])

    def wait_series(self, selector: str, deadline: float = READY_DEADLINE) -> None:
        """Poll until ``selector`` has series (the import or a remote write landed)."""
        stop_at = time.monotonic() + deadline
        while time.monotonic() < stop_at:
            self.flush()
            got = requests.get(self.url + "/api/v1/series", params={"match[]": selector, "start": "0"}, timeout=5)
            if got.ok and got.json().get("data"):
                return
            time.sleep(0.2)  # poll interval; bounded by the deadline
        raise RuntimeError(f"no {selector} in VictoriaMetrics after {deadline} s: {self.log.read_text()[-2000:]}")


def start_victoria(folder: Path, auth: tuple[str, str] | None = None) -> VictoriaServer:
    port = free_port()
    log = folder / "victoria.log"
    flags = [f"-storageDataPath={folder / 'vmdata'}", f"-httpListenAddr=127.0.0.1:{port}", "-retentionPeriod=100y",
             "-search.latencyOffset=0s", "-search.disableCache", "-loggerLevel=ERROR"]
    if auth:
        flags += [f"-httpAuth.username={auth[0]}", f"-httpAuth.password={auth[1]}"]
    with log.open("w") as sink:
        process = subprocess.Popen([VICTORIA, *flags], stdout=sink, stderr=subprocess.STDOUT, cwd=folder)
    server = VictoriaServer(f"http://127.0.0.1:{port}", process, folder, log)
    stop_at = time.monotonic() + READY_DEADLINE
    while time.monotonic() < stop_at:
        if process.poll() is not None:
            raise RuntimeError(f"victoria-metrics exited: {log.read_text(errors='replace')[-2000:]}")
        try:
            if requests.get(server.url + "/health", timeout=1, auth=auth).ok:
                return server
        except requests.RequestException:
            pass
        time.sleep(0.1)  # poll interval; bounded by the deadline
    server.stop()
    raise RuntimeError(f"victoria-metrics not ready after {READY_DEADLINE} s")


PADDING = "zz_vmctl_import_padding"  # sorts after every real series (a block's series are sorted by __name__ first)
PADDING_SERIES = 64


def with_import_padding(openmetrics: str) -> str:
    """The OpenMetrics text plus throwaway series that sort last. vmctl 1.79 (Debian bookworm) sometimes drops the
    last few series of a block when it finishes reading (its own stats count fewer samples than the block holds):
    the padding takes that loss, and vmctl_import checks every real series arrived."""
    series, first = openmetrics_series(openmetrics)
    stamp = max(ts for points in series.values() for ts, _ in points)
    rows = [f'{PADDING}{{n="{i:03d}"}} 1 {t:.3f}' for i in range(PADDING_SERIES) for t in (first, stamp)]
    body = openmetrics.removesuffix("# EOF\n").rstrip("\n")
    return "\n".join([body, f"# TYPE {PADDING} gauge", *rows, "# EOF"]) + "\n"


def series_count(openmetrics: str) -> int:
    return len(openmetrics_series(openmetrics)[0])


def vmctl_import(blocks: Path, server: VictoriaServer, probe: str = '{__name__=~"vllm:.+"}',
                 expected: int | None = None) -> None:
    """Import promtool-built TSDB blocks with ``vmctl prometheus --prom-snapshot`` (under ``script``: vmctl wants a
    terminal), then wait until the series are searchable (all ``expected`` of them matching ``probe``)."""
    command = shlex.join([VMCTL, "prometheus", f"--prom-snapshot={blocks}", f"--vm-addr={server.url}", "-s",
                          "--vm-concurrency=1", "--prom-concurrency=1"])
    done = subprocess.run([SCRIPT, "-qec", command, "/dev/null"], capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)
    if done.returncode:
        raise RuntimeError(f"vmctl import failed ({done.returncode}): {done.stdout[-2000:]} {done.stderr[-2000:]}")
    server.wait_series(probe)
    if expected is not None:
        got = server.count_series(probe)
        if got != expected:
            raise RuntimeError(f"vmctl imported {got} of {expected} series matching {probe}: {done.stdout[-800:]}")


def vmalert_replay(folder: Path, rule_file: Path, server: VictoriaServer, start: str, end: str,
                   interval: str = "1m", extra_label: str | None = None) -> subprocess.CompletedProcess:
    """``vmalert -replay`` of the rule file over [start, end] reading and writing the same VictoriaMetrics: the
    recording rules' results are written back, so the alerts that read them see them (-replay.rulesDelay)."""
    log = folder / "vmalert.log"
    done = subprocess.run([VMALERT, f"-rule={rule_file}", f"-datasource.url={server.url}",
                           f"-remoteWrite.url={server.url}", f"-replay.timeFrom={start}", f"-replay.timeTo={end}",
                           f"-evaluationInterval={interval}", "-replay.disableProgressBar", "-replay.rulesDelay=1s",
                           "-remoteWrite.flushInterval=200ms", "-loggerLevel=WARN", "-datasource.queryStep=15s",
                           f"-httpListenAddr=127.0.0.1:{free_port()}",
                           *([f"-external.label={extra_label}"] if extra_label else [])],
                          capture_output=True, text=True, timeout=600, cwd=folder)
    log.write_text(done.stdout + done.stderr)
    return done


# ---------------------------------------------------------------- a fleet: every scenario as one replica


def with_label(openmetrics: str, name: str, value: str) -> list[str]:
    """The sample and header lines of one OpenMetrics text with ``name="value"`` added to every sample."""
    out = []
    for line in openmetrics.splitlines():
        if not line or line == "# EOF":
            continue
        if not line.startswith("#"):
            brace = line.find("{")
            space = line.find(" ")
            if brace != -1 and brace < space:
                line = f'{line[:brace + 1]}{name}="{value}",{line[brace + 1:]}'
            else:
                line = f'{line[:space]}{{{name}="{value}"}}{line[space:]}'
        out.append(line)
    return out


def merge_openmetrics(texts: dict[str, str], label: str = "instance") -> str:
    """One OpenMetrics text holding several, each tagged ``label=<key>``: families keep one header, each series
    stays contiguous and in time order (what promtool's backfill wants)."""
    heads: dict[str, list[str]] = {}
    rows: dict[str, list[str]] = {}
    for key, text in texts.items():
        current = ""
        known = set(heads)  # families an earlier text brought: keep their header
        for line in with_label(text, label, key):
            if line.startswith("#"):
                current = line.split(" ")[2]
                if current not in known:
                    heads.setdefault(current, []).append(line)
                    rows.setdefault(current, [])
                continue
            rows[current].append(line)
    out = [line for family in heads for line in (*heads[family], *rows[family])]
    return "\n".join([*out, "# EOF"]) + "\n"
