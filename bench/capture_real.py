"""Capture what the real load-test tools write, run against the OpenAI simulator, as test fixtures.

For each tool: a throw-away venv (under --work, default /tmp/triage-capture) with the pinned release from PyPI.
For each scenario: `python -m triage simulate --scenario S --openai --port 0` on 127.0.0.1, then each tool runs
against it with the scenario's workload (below), and the tool's output files are copied UNMODIFIED to
tests/fixtures/real/<tool>/<scenario>/ beside a PROVENANCE.md (tool and version, exact command, scenario, date).

No tokenizer can be downloaded here, so bench/make_tokenizer.py writes a tiny local word-level tokenizer that
counts tokens exactly as the simulator does; every tool is pointed at it.

Usage (from the repo root, with the project's venv):
    .venv/bin/python bench/capture_real.py [--tools guidellm,aiperf,...] [--scenarios healthy,...]
CI never runs this: it reads the committed fixtures.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "fixtures" / "real"
MODEL = "meta-llama/Llama-3.1-8B-Instruct"


@dataclass(frozen=True)
class Workload:
    """What the client sends in a scenario: concurrency, fixed prompt/output tokens, request count."""

    concurrency: int
    prompt: int
    output: int
    requests: int
    why: str


# The engine side of each scenario is tree/scenarios.yaml; the client side is chosen so the tool's own load
# produces the symptom, and small enough that a tool's run takes well under a minute.
WORKLOADS: dict[str, Workload] = {
    "healthy": Workload(4, 256, 64, 40, "light chat load far inside capacity"),
    "queueing": Workload(48, 256, 64, 96, "48 in flight against max_num_seqs 16: 32 wait in the engine queue"),
    "prefill_bound": Workload(2, 3000, 32, 16, "3000-token prompts on a GPU that prefills at 0.2 ms/token"),
    "decode_bound": Workload(48, 1000, 96, 96, "48 long-context requests decoding together on a ~300 GB/s GPU"),
}


@dataclass(frozen=True)
class Tool:
    name: str
    spec: str                      # pip requirement(s), pinned
    python: str                    # minimum Python the release needs ("3.11", "3.12")
    command: Callable[[Path, str, Path, Workload], list[str]]  # (venv, base url, tokenizer, workload) → argv
    keep: tuple[str, ...]          # output files to keep, relative to the run dir (glob patterns)
    env: tuple[tuple[str, str], ...] = ()
    no_deps: tuple[str, ...] = ()  # installed with --no-deps before `spec` (vLLM: only its bench client is needed)
    sim_args: tuple[str, ...] = ()  # extra simulator flags (the server the tool expects)


def _guidellm(venv: Path, url: str, tok: Path, w: Workload) -> list[str]:
    return [str(venv / "bin" / "guidellm"), "run",
            "--backend", f"kind=openai_http,target={url},model={MODEL}",
            "--profile", f"kind=concurrent,streams={w.concurrency}",
            "--data", f"kind=synthetic_text,prompt_tokens={w.prompt},output_tokens={w.output}",
            "--tokenizer", f"kind=huggingface_auto,model={tok}",
            "--constraint", f"kind=max_requests,count={w.requests}",
            "--output", "kind=json,path=benchmarks.json", "--output", "kind=csv,path=benchmarks.csv",
            "--disable-progress"]


def _aiperf(venv: Path, url: str, tok: Path, w: Workload) -> list[str]:
    return [str(venv / "bin" / "aiperf"), "profile", "--model", MODEL, "--url", url, "--endpoint-type", "chat",
            "--streaming", "--concurrency", str(w.concurrency), "--request-count", str(w.requests),
            "--prompt-input-tokens-mean", str(w.prompt), "--prompt-input-tokens-stddev", "0",
            "--prompt-output-tokens-mean", str(w.output), "--prompt-output-tokens-stddev", "0",
            "--extra-inputs", "ignore_eos:true", "--tokenizer", str(tok), "--output-artifact-dir", "out",
            "--ui-type", "simple", "--random-seed", "1"]


def _inference_perf(venv: Path, url: str, tok: Path, w: Workload) -> list[str]:
    """inference-perf reads a YAML config; it is written beside the run (and quoted in PROVENANCE.md)."""
    fixed = {"type": "fixed", "std_dev": 0}
    config = {
        "api": {"type": "completion", "streaming": True},  # its random datagen serves completions only
        "data": {"type": "random",
                 "input_distribution": {**fixed, "min": w.prompt, "max": w.prompt, "mean": w.prompt},
                 "output_distribution": {**fixed, "min": w.output, "max": w.output, "mean": w.output}},
        "load": {"type": "concurrent", "stages": [{"num_requests": w.requests, "concurrency_level": w.concurrency}],
                 "num_workers": 1, "worker_max_concurrency": max(w.concurrency, 1), "base_seed": 1},
        "server": {"type": "vllm", "model_name": MODEL, "base_url": url, "ignore_eos": True},
        "tokenizer": {"pretrained_model_name_or_path": str(tok)},
        # per-request entries keep timings and token counts, not the raw request/response payloads (~40 kB each)
        "report": {"request_lifecycle": {"summary": True, "per_stage": True, "per_request": True,
                                         "per_request_fields": {"request": False, "response": False,
                                                                "response_chunks": False}},
                   "prometheus": None},
        "storage": {"local_storage": {"path": "reports"}},
    }
    Path("config.yml").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")  # JSON is YAML
    return [str(venv / "bin" / "inference-perf"), "--config_file", "config.yml"]


def _vllm(venv: Path, url: str, tok: Path, w: Workload) -> list[str]:
    return [str(venv / "bin" / "vllm"), "bench", "serve", "--backend", "openai-chat", "--base-url", url,
            "--endpoint", "/v1/chat/completions", "--model", MODEL, "--tokenizer", str(tok),
            "--dataset-name", "random", "--random-input-len", str(w.prompt), "--random-output-len", str(w.output),
            "--random-range-ratio", "0", "--num-prompts", str(w.requests), "--max-concurrency", str(w.concurrency),
            "--request-rate", "inf", "--ignore-eos", "--percentile-metrics", "ttft,tpot,itl,e2el",
            "--seed", "1", "--save-result", "--save-detailed", "--result-dir", ".",
            "--result-filename", "vllm_bench.json"]


# vLLM's bench client needs vllm itself (no GPU): the wheel without its dependencies, then only what the
# `vllm bench serve` import path needs, with a CPU torch.
VLLM_DEPS = ("torch==2.13.0 transformers>=5.16.1,<5.21.0 aiohttp tqdm regex cachetools psutil numpy pillow pydantic "
             "pyyaml msgspec cloudpickle huggingface_hub>=1.31.0 tokenizers>=0.23.2 safetensors sentencepiece "
             "py-cpuinfo blake3 openai fastapi<0.137.0 pyzmq orjson prometheus_client datasets cbor2 urllib3 requests "
             "openai-harmony pybase64 uvloop partial-json-parser uvicorn xgrammar llguidance watchfiles einops")

TOOLS: dict[str, Tool] = {
    "guidellm": Tool("guidellm", "guidellm==0.8.1", "3.11", _guidellm, ("benchmarks.json", "benchmarks.csv"),
                     env=(("HF_HUB_OFFLINE", "1"), ("TRANSFORMERS_OFFLINE", "1"))),
    "aiperf": Tool("aiperf", "aiperf==0.13.0", "3.11", _aiperf,
                   ("out/profile_export_aiperf.csv", "out/profile_export_aiperf.json", "out/profile_export.jsonl")),
    "vllm": Tool("vllm", VLLM_DEPS, "3.11", _vllm, ("vllm_bench.json",), no_deps=("vllm==0.33.0",),
                 env=(("HF_HUB_OFFLINE", "1"), ("TRANSFORMERS_OFFLINE", "1"), ("VLLM_TARGET_DEVICE", "cpu")),
                 sim_args=("--per-request-metrics",)),
    "inference-perf": Tool("inference-perf", "inference-perf==0.7.0", "3.12", _inference_perf,
                           ("reports/*lifecycle_metrics.json",)),
}


# ---- helpers -------------------------------------------------------------------------------------------
def find_python(minimum: str) -> str:
    """A Python interpreter of at least `minimum` (PATH first, then pyenv's versions)."""
    want = tuple(int(x) for x in minimum.split("."))
    if sys.version_info[:2] >= want:
        return sys.executable
    for minor in range(want[1], 15):
        exe = shutil.which(f"python{want[0]}.{minor}")
        if exe:
            return exe
        for cand in sorted(Path.home().glob(f".pyenv/versions/{want[0]}.{minor}.*/bin/python3")):
            return str(cand)
    raise SystemExit(f"no Python >= {minimum} found for this tool")


def ensure_venv(tool: Tool, work: Path) -> Path:
    venv = work / f"venv-{tool.name}"
    marker = venv / ".installed"
    if marker.exists() and marker.read_text() == tool.spec + "|" + ",".join(tool.no_deps):
        return venv
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run([find_python(tool.python), "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
    if tool.no_deps:
        subprocess.run([*pip, "--no-deps", *tool.no_deps], check=True)
    subprocess.run([*pip, *tool.spec.split()], check=True)
    marker.write_text(tool.spec + "|" + ",".join(tool.no_deps))
    return venv


def installed_version(venv: Path, dist: str) -> str:
    out = subprocess.run([str(venv / "bin" / "python"), "-c",
                          f"import importlib.metadata as m; print(m.version({dist!r}))"],
                         capture_output=True, text=True, check=True)
    return out.stdout.strip()


def make_tokenizer(work: Path) -> Path:
    tok = work / "tokenizer"
    venv = ensure_venv(TOOLS["guidellm"], work)  # any venv with `tokenizers`
    subprocess.run([str(venv / "bin" / "python"), str(ROOT / "bench" / "make_tokenizer.py"), str(tok)], check=True)
    return tok


class Simulator:
    """`python -m triage simulate --openai` on a free loopback port, stopped by PID."""

    def __init__(self, scenario: str, seed: int = 0, extra: tuple[str, ...] = ()) -> None:
        self.argv = [sys.executable, "-m", "triage", "simulate", "--scenario", scenario, "--openai", "--port", "0",
                     "--seed", str(seed), *extra]
        self.proc = subprocess.Popen(self.argv, cwd=ROOT, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if "http://" not in line:
            self.stop()
            raise SystemExit(f"simulator did not start: {line!r}")
        self.url = "http://" + line.split("http://", 1)[1].split("/v1", 1)[0]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


PROVENANCE = """# Provenance: {tool} / {scenario}

These files were written by **{tool} {version}** (installed from PyPI as `{spec}` into a throw-away venv,
Python {python}) and copied here **unmodified** by `bench/capture_real.py`. CI reads them; it never re-runs the tool.

- Date (UTC): {date}
- Scenario: `{scenario}` — server side from `tree/scenarios.yaml`, served by
  `{sim}` (seed 0; the port was chosen free at run time and appears in the command below as {url})
- Workload: concurrency {w.concurrency}, {w.prompt} prompt tokens, {w.output} output tokens (ignore_eos), {w.requests}
  requests — {w.why}
- Tokenizer: a local word-level tokenizer written by `bench/make_tokenizer.py` (no hub download), so the tool's
  token counts equal the simulator's
- Model name sent: `{model}`
- Tool run time: {seconds:.1f} s

Exact command (run in an empty directory):

```
{command}
```

Files: {files}
{config}"""


def _config_note(run_dir: Path) -> str:
    config = run_dir / "config.yml"
    if not config.exists():
        return ""
    return f"\n`config.yml`, written by the script into that directory:\n\n```\n{config.read_text().strip()}\n```\n"


def run_tool(tool: Tool, scenario: str, sim: Simulator, work: Path, tok: Path) -> None:
    venv = ensure_venv(tool, work)
    w = WORKLOADS[scenario]
    run_dir = work / "runs" / tool.name / scenario
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    here = Path.cwd()
    os.chdir(run_dir)  # builders that write a config file write it into the run directory
    try:
        argv = tool.command(venv, sim.url, tok, w)
    finally:
        os.chdir(here)
    env = {**os.environ, "HF_HUB_DISABLE_TELEMETRY": "1", "DO_NOT_TRACK": "1", **dict(tool.env)}
    started = time.monotonic()
    with open(run_dir / "tool.log", "w") as log:
        done = subprocess.run(argv, cwd=run_dir, stdout=log, stderr=subprocess.STDOUT, env=env, timeout=900)
    seconds = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"{tool.name} failed on {scenario} (exit {done.returncode}); see {run_dir / 'tool.log'}")
    dest = OUT / tool.name / scenario
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    kept = []
    for pattern in tool.keep:
        for src in sorted(run_dir.glob(pattern)):
            shutil.copy2(src, dest / src.name)
            kept.append(src.name)
    if not kept:
        raise SystemExit(f"{tool.name} wrote none of {tool.keep} in {run_dir}")
    dist = (tool.no_deps or tool.spec.split())[0].split("==")[0]
    pyver = subprocess.run([str(venv / "bin" / "python"), "-c", "import platform; print(platform.python_version())"],
                           capture_output=True, text=True, check=True).stdout.strip()
    (dest / "PROVENANCE.md").write_text(PROVENANCE.format(
        tool=tool.name, version=installed_version(venv, dist), python=pyver,
        spec=f"{' '.join(tool.no_deps)}` (--no-deps) with `{tool.spec}" if tool.no_deps else tool.spec,
        date=dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M"), scenario=scenario,
        sim=shlex.join(["python", *sim.argv[1:]]), url=sim.url, w=w, model=MODEL,
        seconds=seconds, command=shlex.join(argv).replace(str(work), "$WORK"),
        files=", ".join(f"`{k}`" for k in kept), config=_config_note(run_dir)), encoding="utf-8")
    print(f"  {tool.name}: {', '.join(kept)} in {seconds:.0f} s", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tools", default=",".join(TOOLS), help=f"comma list of: {', '.join(TOOLS)}")
    ap.add_argument("--scenarios", default=",".join(WORKLOADS), help=f"comma list of: {', '.join(WORKLOADS)}")
    ap.add_argument("--work", type=Path, default=Path("/tmp/triage-capture"), help="venvs and raw runs go here")
    args = ap.parse_args()
    tools = [TOOLS[t] for t in args.tools.split(",")]
    scenarios = args.scenarios.split(",")
    args.work.mkdir(parents=True, exist_ok=True)
    for tool in tools:
        ensure_venv(tool, args.work)
    tok = make_tokenizer(args.work)
    for scenario in scenarios:
        print(f"{scenario}:", flush=True)
        for tool in tools:
            sim = Simulator(scenario, extra=tool.sim_args)  # a fresh server per tool: no state carried over
            try:
                run_tool(tool, scenario, sim, args.work, tok)
            finally:
                sim.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
