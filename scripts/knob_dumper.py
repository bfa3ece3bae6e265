"""Runs INSIDE a throw-away engine venv (stdlib + the engine only): dumps the engine's own argparse parser
and parses example command lines with it.

    <venv>/bin/python scripts/knob_dumper.py ENGINE < commands.json > result.json

ENGINE is one of vllm, sglang, sglang-router, vllm-router. stdin: a JSON list of argument lists (the
tokens after the command name, e.g. ["meta-llama/X", "--max-num-seqs", "8"]). stdout: one JSON object
{"dump": {...}, "parsed": [{"ok": bool, "error": str}, ...]}. Launched by scripts/verify_knobs.py; it
never imports the project (the project's venv does not have the engines, this one does not have the project).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import enum
import importlib.metadata
import io
import json
import os
import sys
from typing import Any

DIST = {"vllm": "vllm", "sglang": "sglang", "sglang-router": "sglang-router", "vllm-router": "vllm-router"}


def _plain(value: Any) -> Any:
    """A JSON-safe form of a default or a choice (enums by value, unknown objects by repr)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, enum.Enum):
        return _plain(value.value) if isinstance(value.value, (str, int, float)) else value.name
    if isinstance(value, (list, tuple, set, frozenset)):
        items = [_plain(v) for v in value]
        return sorted(items, key=repr) if isinstance(value, (set, frozenset)) else items
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if dataclasses.is_dataclass(value):
        return f"<{type(value).__name__}>"
    return repr(value)


def _first_line(text: str | None) -> str:
    """The help text's first paragraph on one line, at most 200 characters."""
    paragraph = (text or "").strip().split("\n\n")[0]
    line = " ".join(paragraph.split()).replace("%%", "%")
    return line if len(line) <= 200 else line[:197] + "..."


def _actions(parser: argparse.ArgumentParser, deprecated: set) -> dict[str, dict]:
    flags: dict[str, dict] = {}
    for action in parser._actions:
        if not action.option_strings or isinstance(action, argparse._HelpAction):
            continue
        primary = action.option_strings[0]
        help_text = action.help if action.help is not argparse.SUPPRESS else ""
        entry = {
            "names": list(action.option_strings),
            "dest": action.dest,
            "default": _plain(action.default) if action.default is not argparse.SUPPRESS else None,
            # sorted: some choices come from sets or Rust maps whose order changes run to run
            "choices": sorted(_plain(list(action.choices)), key=lambda c: (c is None, str(c)))
            if action.choices is not None else None,
            "takes_value": action.nargs != 0,
            "nargs": action.nargs if action.nargs is None or isinstance(action.nargs, (int, str))
            else str(action.nargs),
            "help": _first_line(help_text),
            "deprecated": bool(action in deprecated or getattr(action, "deprecated", False)
                               or "deprecated" in (help_text or "").lower()),
        }
        flags[primary] = entry
    return dict(sorted(flags.items()))


def _parse_all(parser: argparse.ArgumentParser, argvs: list[list[str]], prefix: list[str]) -> list[dict]:
    results = []
    for argv in argvs:
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                parser.parse_args(prefix + argv)
            results.append({"ok": True, "error": ""})
        except SystemExit as exc:
            lines = [ln for ln in err.getvalue().strip().splitlines() if ln.strip()]
            results.append({"ok": False, "error": lines[-1] if lines else f"exit {exc.code}"})
        except Exception as exc:  # a type= converter that raises something else
            results.append({"ok": False, "error": f"{type(exc).__name__}: {exc}"})
    return results


def _enum_fields(cls: type) -> dict[str, list[str]]:
    """Fields of a config dataclass typed with an Enum (argparse sees them as plain strings): their names."""
    import typing

    out: dict[str, list[str]] = {}
    with contextlib.suppress(Exception):
        hints = typing.get_type_hints(cls)
        for name, hint in hints.items():
            for arg in (hint, *typing.get_args(hint)):
                if isinstance(arg, type) and issubclass(arg, enum.Enum):
                    out[name] = [m.name for m in arg]
    return out


def _vllm() -> tuple[argparse.ArgumentParser, list[str], dict]:
    sys.argv = ["vllm", "--help-dump"]  # vLLM attaches help texts only when a '--help' is on the command line
    import vllm.platforms as platforms
    from vllm.platforms.interface import Platform, PlatformEnum

    class ParserOnlyCuda(Platform):
        """A CUDA platform that answers questions about itself without a GPU (enough to build the parser)."""

        _enum = PlatformEnum.CUDA
        device_name = "cuda"
        device_type = "cuda"
        dispatch_key = "CUDA"
        ray_device_key = "GPU"
        device_control_env_var = "CUDA_VISIBLE_DEVICES"

    platforms.current_platform = ParserOnlyCuda()
    import vllm.envs as envs
    from vllm.engine.arg_utils import get_kwargs
    from vllm.entrypoints.cli.serve import ServeSubcommand
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    top = FlexibleArgumentParser(prog="vllm")
    sub = top.add_subparsers(dest="subparser")
    serve = ServeSubcommand().subparser_init(sub)
    extra: dict[str, Any] = {"platform": "CUDA (parser only, no GPU)"}
    from vllm.config import KVEventsConfig, KVTransferConfig, SpeculativeConfig
    from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory

    # JSON-valued flags whose keys are the fields of a config class (typed as a dict on the command line)
    json_flags: dict[str, type] = {"--speculative-config": SpeculativeConfig,
                                   "--kv-transfer-config": KVTransferConfig,
                                   "--kv-events-config": KVEventsConfig}
    for action in serve._actions:
        cls = (getattr(action.type, "__defaults__", None) or (None,))[0]
        if action.option_strings and isinstance(cls, type) and dataclasses.is_dataclass(cls):
            json_flags[action.option_strings[0]] = cls
    configs: dict[str, dict] = {}
    for flag, cls in sorted(json_flags.items()):
        fields = {}
        enums = _enum_fields(cls)
        for name, kw in get_kwargs(cls).items():
            choices = kw.get("choices")
            fields[name] = {"default": _plain(kw.get("default")),
                            "choices": _plain(choices) if choices is not None else enums.get(name)}
        configs[flag] = {"class": cls.__name__, "fields": fields}
    configs["--kv-transfer-config"]["fields"]["kv_connector"]["choices"] = sorted(KVConnectorFactory._registry)
    extra["configs"] = configs
    extra["env"] = sorted(envs.environment_variables)
    # string flags the parser accepts as free text but the engine validates against a list when it starts
    import typing

    from vllm.config.cache import CacheDType
    from vllm.model_executor.layers.quantization import QUANTIZATION_METHODS
    from vllm.v1.attention.backends.registry import AttentionBackendEnum

    extra["valid_values"] = {
        "--quantization": {"from": "vllm.model_executor.layers.quantization.QUANTIZATION_METHODS",
                           "values": list(QUANTIZATION_METHODS)},
        "--kv-cache-dtype": {"from": "vllm.config.cache.CacheDType", "values": list(typing.get_args(CacheDType))},
        "--attention-backend": {"from": "vllm.v1.attention.backends.registry.AttentionBackendEnum",
                                "values": [m.name for m in AttentionBackendEnum]},
    }
    extra["deprecated_set"] = serve._deprecated
    return top, ["serve"], extra | {"_parser": serve}


def _sglang() -> tuple[argparse.ArgumentParser, list[str], dict]:
    from sglang.srt.server_args import ServerArgs

    parser = argparse.ArgumentParser(prog="python -m sglang.launch_server")
    ServerArgs.add_cli_args(parser)
    extra: dict[str, Any] = {}
    with contextlib.suppress(Exception):
        from sglang.srt.environ import envs

        names = [k for k in dir(type(envs)) if k.isupper()] or [k for k in vars(envs) if k.isupper()]
        extra["env"] = sorted(names)
    return parser, [], extra


def _router(module: str, prog: str) -> tuple[argparse.ArgumentParser, list[str], dict]:
    router_args = __import__(f"{module}.router_args", fromlist=["RouterArgs"])
    parser = argparse.ArgumentParser(prog=prog)
    router_args.RouterArgs.add_cli_args(parser, use_router_prefix=False)
    return parser, [], {}


BUILDERS = {
    "vllm": _vllm,
    "sglang": _sglang,
    "sglang-router": lambda: _router("sglang_router", "python -m sglang_router.launch_router"),
    "vllm-router": lambda: _router("vllm_router", "vllm-router"),
}


def main() -> int:
    engine = sys.argv[1]
    argvs = json.loads(sys.stdin.read() or "[]")
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    with contextlib.redirect_stdout(sys.stderr):  # engines print banners on import
        top, prefix, extra = BUILDERS[engine]()
        inner = extra.pop("_parser", top)
        deprecated = extra.pop("deprecated_set", set()) or getattr(inner, "_deprecated", set())
        dump = {
            "engine": engine,
            "version": importlib.metadata.version(DIST[engine]),
            "python": sys.version.split()[0],
            "command": top.prog if not prefix else f"{top.prog} {' '.join(prefix)}",
            "flags": _actions(inner, deprecated),
            **{k: v for k, v in extra.items()},
        }
        parsed = _parse_all(top, argvs, prefix)
    json.dump({"dump": dump, "parsed": parsed}, sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
