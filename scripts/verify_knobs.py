"""Dump the engines' own argument parsers and parse every technique example with them.

    .venv/bin/python -m scripts.verify_knobs                       # all tools, throw-away venvs
    .venv/bin/python -m scripts.verify_knobs --venv-root /tmp/kv --keep   # keep (and reuse) the venvs
    .venv/bin/python -m scripts.verify_knobs --tgi-repo /path/to/text-generation-inference.git

For each pinned tool (vLLM, SGLang, sglang-router, vllm-router) it makes a venv, installs the engine without its
dependencies plus a CPU build of torch, then installs only the modules the parser's import chain asks for (one
ModuleNotFoundError at a time, torch held at the CPU build by a constraint), so no GPU kernels are downloaded.
Inside the venv ``scripts/knob_dumper.py`` builds the engine's real parser (vLLM: the ``vllm serve`` sub-parser on a
parser-only CUDA platform; SGLang: ``ServerArgs.add_cli_args``; routers: ``RouterArgs.add_cli_args``), writes
``tree/engines/flags/<tool>-<version>.json`` (flags, aliases, choices, defaults, help's first paragraph, deprecation,
JSON-config fields, environment variables) and parses every example command of tree/techniques/ with it.
TGI's launcher is a Rust binary not on PyPI: its dump is read from the launcher reference
(docs/source/reference/launcher.md, the ``--help`` text) and the environment variables the launcher and server read,
at a release tag of a local git clone (``--tgi-repo``).

Exit 0 when every example parses and the static check (triage.knowledge.knobs) finds nothing; 1 otherwise; 2 on
bad usage or an install that cannot be repaired.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from triage.knowledge.knobs import (
    FLAGS_DIR,
    check_technique,
    dump_path,
    example_commands,
)
from triage.knowledge.loader import load_knowledge

ROOT = Path(__file__).resolve().parents[1]

PINS: dict[str, str] = {"vllm": "0.33.0", "sglang": "0.5.23", "sglang-router": "0.3.2", "vllm-router": "0.1.17"}
TGI_TAG = "v3.3.7"
DUMPER = ROOT / "scripts" / "knob_dumper.py"
# import name → distribution name, where they differ
MODULE_DIST = {"tvm_ffi": "apache-tvm-ffi", "cv2": "opencv-python-headless", "google": "protobuf", "yaml": "pyyaml",
               "zmq": "pyzmq", "PIL": "pillow", "cpuinfo": "py-cpuinfo", "openai_harmony": "openai-harmony",
               "dateutil": "python-dateutil", "IPython": "ipython", "sklearn": "scikit-learn", "jwt": "pyjwt"}
# imported by the parser's import chain but carrying heavy (GPU) dependencies: installed without them
NO_DEPS = {"xgrammar", "apache-tvm-ffi", "llguidance", "triton", "compressed-tensors", "flashinfer-python",
           "outlines-core", "torchvision", "torchaudio"}
TORCH_DEPS = ["typing_extensions", "sympy", "networkx", "jinja2", "fsspec", "filelock", "numpy"]


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def pip(venv: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check", *args]
    return subprocess.run(cmd, capture_output=True, text=True)


def installed_version(venv: Path, dist: str) -> str | None:
    code = f"import importlib.metadata as m; print(m.version({dist!r}))"
    res = subprocess.run([str(venv / "bin" / "python"), "-c", code], capture_output=True, text=True)
    return res.stdout.strip() if res.returncode == 0 else None


def run_dumper(venv: Path, tool: str, argvs: list[list[str]]) -> subprocess.CompletedProcess:
    # a fixed hash seed: some choices lists are built from sets, and the dump should not change run to run
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    return subprocess.run([str(venv / "bin" / "python"), str(DUMPER), tool], input=json.dumps(argvs),
                          capture_output=True, text=True, timeout=900, env=env)


def prepare(venv: Path, tool: str, version: str, torch_spec: str, needs_torch: bool) -> None:
    """A venv with the engine (no deps) and, if it needs one, a CPU torch held in place by a constraint."""
    if not (venv / "bin" / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    if installed_version(venv, tool) != version:
        log(f"[{tool}] installing {tool}=={version} (no deps)")
        res = pip(venv, "--no-deps", f"{tool}=={version}")
        if res.returncode:
            raise SystemExit(f"cannot install {tool}=={version}: {res.stderr.strip().splitlines()[-1:]}")
    if needs_torch and installed_version(venv, "torch") is None:
        log(f"[{tool}] installing {torch_spec} (no deps) and its small dependencies")
        res = pip(venv, "--no-deps", torch_spec)
        if res.returncode:
            raise SystemExit(f"cannot install {torch_spec}: {res.stderr.strip().splitlines()[-1:]}")
        pip(venv, *TORCH_DEPS)


def repair(venv: Path, tool: str, argvs: list[list[str]], rounds: int = 60) -> dict:
    """Run the dumper; on each missing module install that one module; return the dumper's output."""
    torch = installed_version(venv, "torch")
    constraint = venv / "constraints.txt"
    constraint.write_text(f"torch=={torch}\n" if torch else "")
    added: list[str] = []
    for _ in range(rounds):
        res = run_dumper(venv, tool, argvs)
        if res.returncode == 0:
            out = json.loads(res.stdout)
            out["dump"]["installed_for_parser"] = added
            return out
        missing = re.findall(r"No module named '([^'.]+)", res.stderr)
        if not missing:
            raise SystemExit(f"[{tool}] the parser does not build:\n{res.stderr[-3000:]}")
        module = missing[-1]
        dist = MODULE_DIST.get(module, module).replace("_", "-")
        log(f"[{tool}] parser imports {module}: installing {dist}")
        args = ["--no-deps", dist] if dist in NO_DEPS else ["-c", str(constraint), dist]
        res_pip = pip(venv, *args)
        if res_pip.returncode and "--no-deps" not in args:
            res_pip = pip(venv, "--no-deps", dist)
        if res_pip.returncode:
            raise SystemExit(f"[{tool}] cannot install {dist}: {res_pip.stderr.strip()[-500:]}")
        added.append(f"{dist}=={installed_version(venv, dist) or '?'}")
    raise SystemExit(f"[{tool}] still missing modules after {rounds} installs")


# ---- TGI from its launcher reference ----------------------------------------------------------------------------

_TGI_OPT = re.compile(r"^\s{2}(?:(-\w), |\s{4})(--[a-z0-9-]+)(?: <([A-Z0-9_]+)>)?\s*$")


def parse_tgi_launcher(text: str) -> dict[str, dict]:
    """Options of ``text-generation-launcher --help`` as the launcher reference prints them."""
    flags: dict[str, dict] = {}
    current: dict | None = None
    help_lines: list[str] = []
    possible: list[str] = []
    in_possible = False
    for line in text.splitlines():
        m = _TGI_OPT.match(line)
        if m:
            short, name, metavar = m.groups()
            current = {"names": [name] + ([short] if short else []), "dest": name[2:].replace("-", "_"),
                       "default": None, "choices": None, "takes_value": metavar is not None, "nargs": None,
                       "help": "", "deprecated": False, "env": None}
            flags[name] = current
            help_lines, possible, in_possible = [], [], False
            continue
        if current is None:
            continue
        body = line.strip()
        if body.startswith("```"):
            current["help"] = " ".join(help_lines)[:200]
            if possible:
                current["choices"] = possible
            current = None
            continue
        if m_env := re.match(r"^\[env: ([A-Z0-9_]+)=\]$", body):
            current["env"] = m_env.group(1)
        elif m_def := re.match(r"^\[default: (.*)\]$", body):
            current["default"] = _tgi_value(m_def.group(1))
        elif m_pos := re.match(r"^\[possible values: (.*)\]$", body):
            current["choices"] = [v.strip() for v in m_pos.group(1).split(",")]
        elif body == "Possible values:":
            in_possible = True
        elif in_possible and (m_item := re.match(r"^- ([a-z0-9_.-]+):", body)):
            possible.append(m_item.group(1))
        elif body and not in_possible and not help_lines:
            help_lines.append(body)
        if "deprecated" in body.lower() or body.startswith("Legacy version"):
            current["deprecated"] = True
    for entry in flags.values():
        if not entry["takes_value"]:
            entry["nargs"] = 0
            entry["default"] = False
    return dict(sorted(flags.items()))


def _tgi_value(raw: str) -> object:
    for kind in (int, float):
        try:
            return kind(raw)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(raw, raw)


def tgi_dump(repo: Path, tag: str) -> dict:
    def show(path: str) -> str:
        return subprocess.run(["git", "--git-dir", str(repo), "show", f"{tag}:{path}"], capture_output=True,
                              text=True, check=True).stdout

    flags = parse_tgi_launcher(show("docs/source/reference/launcher.md"))
    env = {e["env"] for e in flags.values() if e.get("env")}
    env |= set(re.findall(r'env::var\("([A-Z0-9_]+)"\)', show("launcher/src/main.rs")))
    listing = subprocess.run(["git", "--git-dir", str(repo), "ls-tree", "-r", "--name-only", tag,
                              "server/text_generation_server"], capture_output=True, text=True, check=True)
    for path in listing.stdout.split():
        if path.endswith(".py"):
            env |= set(re.findall(r'os\.(?:getenv|environ\.get)\(\s*"([A-Z0-9_]+)"', show(path)))
    commit = subprocess.run(["git", "--git-dir", str(repo), "rev-list", "-n1", tag], capture_output=True,
                            text=True, check=True).stdout.strip()
    return {"engine": "tgi", "version": tag.lstrip("v"), "command": "text-generation-launcher",
            "source": f"huggingface/text-generation-inference {tag} ({commit}): docs/source/reference/launcher.md "
                      "(the launcher's --help text); env from launcher/src/main.rs and server/text_generation_server",
            "allow_abbrev": False, "flags": flags, "env": sorted(env)}


# ---- main -------------------------------------------------------------------------------------------------------


def examples_by_tool(tree_dir: Path) -> dict[str, list[tuple[str, list[str]]]]:
    kb = load_knowledge(tree_dir)
    out: dict[str, list[tuple[str, list[str]]]] = {}
    for tech in kb.techniques.values():
        for engine, knobs in tech.knobs.items():
            for cmd in example_commands(knobs.example):
                if cmd.tool:
                    out.setdefault(cmd.tool, []).append((f"{tech.id}/{engine}: {cmd.text}", list(cmd.argv)))
    return out


def write_dump(dump: dict, flags_dir: Path) -> Path:
    path = dump_path(dump["engine"], dump["version"], flags_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(dump, indent=1, sort_keys=False, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tools", nargs="+", default=[*PINS, "tgi"], choices=[*PINS, "tgi"])
    ap.add_argument("--venv-root", type=Path, help="where the throw-away venvs go (default: a temp dir)")
    ap.add_argument("--keep", action="store_true", help="keep the venvs (reused by the next run with --venv-root)")
    ap.add_argument("--torch", default="torch==2.13.0+cpu",
                    help="a CPU torch requirement or wheel path, installed without deps (the parsers import torch)")
    ap.add_argument("--tgi-repo", type=Path, help="git dir of huggingface/text-generation-inference")
    ap.add_argument("--tgi-tag", default=TGI_TAG)
    ap.add_argument("--tree-dir", type=Path, default=ROOT / "tree")
    args = ap.parse_args(argv)
    flags_dir = args.tree_dir / "engines" / "flags" if args.tree_dir != ROOT / "tree" else FLAGS_DIR
    examples = examples_by_tool(args.tree_dir)
    root = args.venv_root or Path(tempfile.mkdtemp(prefix="verify_knobs-"))
    failures = 0
    try:
        for tool in args.tools:
            if tool == "tgi":
                if not args.tgi_repo:
                    log("[tgi] no --tgi-repo: keeping the committed TGI dump")
                    continue
                path = write_dump(tgi_dump(args.tgi_repo, args.tgi_tag), flags_dir)
                log(f"[tgi] wrote {path.relative_to(ROOT)} (static check only: the launcher is not on PyPI)")
                continue
            venv = root / tool
            prepare(venv, tool, PINS[tool], args.torch, needs_torch=tool in ("vllm", "sglang"))
            cases = examples.get(tool, [])
            out = repair(venv, tool, [a for _, a in cases])
            out["dump"]["source"] = (f"pip {tool}=={PINS[tool]} (no deps) + the modules its parser imports, "
                                     f"torch {installed_version(venv, 'torch')}; built by scripts/knob_dumper.py")
            path = write_dump(out["dump"], flags_dir)
            log(f"[{tool}] wrote {path.relative_to(ROOT)}: {len(out['dump']['flags'])} options")
            for (label, _), result in zip(cases, out["parsed"]):
                status = "ok  " if result["ok"] else "FAIL"
                detail = "" if result["ok"] else f"\n     {result['error']}"
                print(f"{status} [{tool} {PINS[tool]}] {label[:110]}{detail}")
                failures += not result["ok"]
    finally:
        if not args.keep and not args.venv_root:
            shutil.rmtree(root, ignore_errors=True)
    kb = load_knowledge(args.tree_dir)
    static = [p for t in kb.techniques.values()
              for p in check_technique(t, f"tree/techniques/{t.id}.yaml", flags_dir)]
    for problem in static:
        print(f"STATIC {problem}")
    print(f"{failures} example command(s) rejected by the engines' parsers; {len(static)} static problem(s)")
    return 1 if failures or static else 0


if __name__ == "__main__":
    raise SystemExit(main())
