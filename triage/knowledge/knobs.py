"""Keep the knobs in tree/techniques/ true to the engines' own parsers.

The argument parsers of the engine versions a technique names in ``verified`` are dumped once by
``scripts/verify_knobs.py`` into ``tree/engines/flags/<tool>-<version>.json``. This module reads those dumps and,
without any engine installed, checks every flag entry (the flag exists, a named choice is a choice, a literal
default is the parser's default) and every example command (each flag exists and is unambiguous, each value is a
choice, each key of a JSON config is a field of that config). It also checks that each published claim names its
paper by a well-formed arXiv id or DOI.

Grammar of a flag entry's ``flag`` text (anything else is reported, so a new form cannot slip by unchecked):

- ``--a`` or ``--a / --b / -c``: options of the engine's own command (``router --a`` for its router); a trailing
  ``(<qualifier>)`` of an engine's launcher (``(vLLM engine)``) says the same;
- ``--a VALUE``: the option with a named value, which must be one of its choices;
- ``--a key`` / ``--a key=VALUE``: a field of the JSON config that ``--a`` takes (so is ``key`` with ``inside: --a``);
- ``NAME`` with ``env: true``: an environment variable the engine reads;
- ``... (production-stack router)`` / ``... (production-stack Helm values)``: another tool, not dumped here.

A ``default`` is data: null (unset, the parser's None), a number, True/False or a word; a list (or ``a / b``) gives
one default per option of a ``--a / --b`` entry. It must be the parser's default, unless a ``default_rule`` says in
words what picks the value (a hardware tier, a formula): then the parser's default may be a literal that rule names.

The tools, their launch commands, labels and environment prefixes are data: the ``launcher`` block of each serving
engine's map (tree/engines/<id>.yaml) and its ``router``; a new engine file with a launcher is checked the same way.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from triage import safe_load
from triage.errors import TriageError
from triage.knowledge.engines import EngineSpec, ToolLaunch
from triage.knowledge.model import Flag, Scalar, Technique, Tool

FLAGS_DIR = Path(__file__).resolve().parents[2] / "tree" / "engines" / "flags"
EXTERNAL = ("production-stack",)


@dataclass(frozen=True)
class ToolSpec:
    """One tool with a dumped parser, as its engine map's ``launcher`` (or that launcher's ``router``) says."""

    id: str
    label: str
    order: int
    commands: tuple[tuple[str, ...], ...]  # prefixes (after NAME=VALUE assignments) whose rest the parser reads
    env_prefixes: tuple[str, ...]
    qualifier: str = ""
    router: str = ""                       # the tool id of ``router --x`` flags


Tools = Mapping[str, ToolSpec]


def _spec(tool_id: str, launch: ToolLaunch, qualifier: str = "", router: str = "") -> ToolSpec:
    return ToolSpec(tool_id, launch.label, launch.order, tuple(tuple(c) for c in launch.commands),
                    tuple(launch.env_prefixes), qualifier, router)


def tools_of(engines: Mapping[str, EngineSpec]) -> dict[str, ToolSpec]:
    """Every tool the engine maps launch, in "flags as of" order (``order``, then id)."""
    out: list[ToolSpec] = []
    for engine in engines.values():
        launcher = engine.launcher
        if launcher is None:
            continue
        router = launcher.router
        out.append(_spec(engine.id, launcher, launcher.qualifier, router.id if router else ""))
        if router is not None:
            out.append(_spec(router.id, router))
    return {t.id: t for t in sorted(out, key=lambda t: (t.order, t.id))}


@cache
def default_tools() -> dict[str, ToolSpec]:
    """The tools of the shipped tree (tree/engines/*.yaml)."""
    from triage.knowledge.engines import load_engines

    return tools_of(load_engines())


def tool_label(tool: str) -> str:
    """A tool's label in the shipped tree (tree/engines/*.yaml launchers); the id itself for an unknown tool."""
    spec = default_tools().get(tool)
    return spec.label if spec is not None else tool


ARXIV_RE = re.compile(r"^arXiv:(\d{4}\.\d{4,5}|[a-z-]+(\.[A-Z]{2})?/\d{7})(v\d+)?$")
DOI_RE = re.compile(r"^10\.\d{4,9}/[-._;()/:A-Za-z0-9]+$")
VENUE_RE = re.compile(r"\b(OSDI|SOSP|NeurIPS|ICML|ICLR|MLSys|ISCA|FAST|SC|EMNLP|arXiv|ASPLOS|EuroSys)\b")


class DumpMissing(LookupError):
    """No committed dump for a tool version: run scripts/verify_knobs.py for it."""


@dataclass(frozen=True)
class Dump:
    """One tool version's parser as dumped: every option string resolves to its action's entry."""

    tool: str
    version: str
    flags: dict[str, dict]
    env: frozenset[str] = frozenset()
    configs: dict[str, dict] = field(default_factory=dict)
    valid_values: dict[str, dict] = field(default_factory=dict)
    allow_abbrev: bool = True

    @property
    def label(self) -> str:
        return f"{tool_label(self.tool)} {self.version}"

    def option(self, name: str) -> dict | None:
        """The entry of an option string, or None."""
        return self.flags.get(name)

    def resolve(self, token: str) -> tuple[dict | None, str]:
        """An option as the parser would resolve it: exact, or a unique prefix (argparse's allow_abbrev)."""
        if token in self.flags:
            return self.flags[token], ""
        if not self.allow_abbrev or not token.startswith("--"):
            return None, f"unrecognized argument {token}"
        hits = sorted({e["names"][0] for name, e in self.flags.items() if name.startswith(token)})
        if len(hits) == 1:
            return self.flags[hits[0]], ""
        if hits:
            return None, f"ambiguous option {token} could match {', '.join(hits)}"
        return None, f"unrecognized argument {token}"


def dump_path(tool: str, version: str, flags_dir: Path = FLAGS_DIR) -> Path:
    return Path(flags_dir) / f"{tool}-{version}.json"


@cache
def _load(path: Path) -> Dump:
    data = json.loads(path.read_text(encoding="utf-8"))
    index: dict[str, dict] = {}
    for entry in data["flags"].values():
        for name in entry["names"]:
            index[name] = entry
    return Dump(tool=data["engine"], version=data["version"], flags=index, env=frozenset(data.get("env", [])),
                configs=data.get("configs", {}), valid_values=data.get("valid_values", {}),
                allow_abbrev=data.get("allow_abbrev", True))


def load_dump(tool: str, version: str, flags_dir: Path = FLAGS_DIR) -> Dump:
    path = dump_path(tool, version, flags_dir)
    if not path.is_file():
        raise DumpMissing(f"no dump {path.name} in {path.parent} (run scripts/verify_knobs.py)")
    return _load(path.resolve())


# ---- literal defaults -------------------------------------------------------------------------------------------

_NONE_WORDS = {"unset", "None"}
_TOKEN_RE = re.compile(r"^-?[A-Za-z0-9_.+\-:]+$")


@dataclass(frozen=True)
class Literal:
    value: Any


def literal(text: str) -> Literal | None:
    """The literal a default states (its head before `` (``), or None when the default is a rule in words."""
    head = text.split(" (", 1)[0].strip().strip('"').strip("'").strip("`")
    if not head or not _TOKEN_RE.match(head):
        return None
    if head in _NONE_WORDS:
        return Literal(None)
    if head in ("True", "true", "on", "False", "false", "off"):
        return Literal(head in ("True", "true", "on"))
    for kind in (int, float):
        try:
            return Literal(kind(head))
        except ValueError:
            pass
    return Literal(head)


def same_value(stated: Any, parsed: Any) -> bool:
    if isinstance(stated, bool) or isinstance(parsed, bool):
        return stated is parsed or (parsed is None and stated is False)  # store_true flags default to False/None
    if isinstance(stated, (int, float)) and isinstance(parsed, (int, float)):
        return float(stated) == float(parsed)
    if stated is None or parsed is None:
        return stated is parsed
    return str(stated) == str(parsed)


def _mentions(text: str, parsed: Any) -> bool:
    if parsed is None or isinstance(parsed, (dict, list)) or str(parsed).startswith("<"):
        return True
    words = re.findall(r"[A-Za-z0-9_.\-]+", text)
    if isinstance(parsed, (int, float)) and not isinstance(parsed, bool):
        return any(_num(w) == float(parsed) for w in words)
    return str(parsed) in words or str(parsed).lower() in (w.lower() for w in words)


def _num(word: str) -> float | None:
    try:
        return float(word)
    except ValueError:
        return None


# ---- flag entries -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FlagRef:
    """One thing a flag entry names, resolved to the tool whose dump must contain it."""

    tool: str
    kind: str  # option | config | env | external
    name: str
    value: str | None = None
    key: str | None = None


def flag_refs(engine: str, text: str, tools: Tools | None = None, env: bool = False,
              inside: str = "") -> list[FlagRef]:
    """What a flag entry's text names (ValueError for a form outside the grammar in the module docstring); ``env``
    and ``inside`` are the entry's own fields."""
    tools = default_tools() if tools is None else tools
    text = text.strip()
    if env:
        return [FlagRef(engine, "env", text)]
    if inside:
        return [FlagRef(engine, "config", inside, key=text)]
    qualifier = ""
    m = re.match(r"^(.*?)\s*\(([^()]*)\)$", text)
    if m:
        text, qualifier = m.group(1).strip(), m.group(2).strip()
    if qualifier and any(x in qualifier for x in EXTERNAL):
        return [FlagRef(engine, "external", text, value=qualifier)]
    if qualifier and qualifier not in {t.qualifier for t in tools.values() if t.qualifier}:
        raise ValueError(f"unknown qualifier ({qualifier})")
    tool = engine
    if text.startswith("router "):
        tool = tools[engine].router if engine in tools else ""
        if not tool:
            raise ValueError(f"{engine} has no router")
        text = text.removeprefix("router ").strip()
    parts = [p.strip() for p in text.split(" / ")]
    refs: list[FlagRef] = []
    for part in parts:
        words = part.split()
        if not words or not words[0].startswith("-"):
            raise ValueError(f"'{part}' is not an option")
        if len(words) == 1:
            refs.append(FlagRef(tool, "option", words[0]))
        elif len(words) == 2 and re.match(r"^[a-z][a-z0-9]*(_[a-z0-9]+)+(=.+)?$|^[a-z_][a-z0-9_]*=.+$", words[1]):
            key, _, value = words[1].partition("=")
            refs.append(FlagRef(tool, "config", words[0], key=key, value=value or None))
        elif len(words) == 2:
            refs.append(FlagRef(tool, "option", words[0], value=words[1]))
        else:
            raise ValueError(f"'{part}' has more than one value")
    return refs


def stated(value: Scalar | None) -> Literal:
    """A default as data, a text read as ``literal`` reads it ("0.92", "True"); any other text as it is."""
    if isinstance(value, str):
        return literal(value) or Literal(value)
    return Literal(value)


def _defaults(flag: Flag, n: int) -> list[Scalar | None]:
    values = flag.defaults()
    return values if len(values) == n else values[:1] * n


# ---- problems ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Problem:
    file: str
    where: str  # the flag entry, or "example"
    version: str  # e.g. "vLLM 0.33.0"
    message: str

    def __str__(self) -> str:
        return f"{self.file}: {self.where} [{self.version}]: {self.message}"


def _version_of(tech: Technique, tool: str) -> str | None:
    return next((version for name, version in tech.verified.items() if name == tool), None)


def _label(tool: str, tools: Tools) -> str:
    return tools[tool].label if tool in tools else tool


def _dump_for(tech: Technique, tool: str, flags_dir: Path, tools: Tools) -> tuple[Dump | None, str]:
    version = _version_of(tech, tool)
    if version is None:
        return None, f"`verified` names no {_label(tool, tools)} version"
    try:
        return load_dump(tool, version, flags_dir), ""
    except DumpMissing as exc:
        return None, str(exc)


def _check_default(default: Scalar | None, rule: str, parsed: Any, where: str) -> list[str]:
    """The stated default against the parser's: the same, or a rule in words naming the parser's literal."""
    lit = stated(default)
    if same_value(lit.value, parsed) or (rule and _mentions(rule, parsed)):
        return []
    if rule:
        return [f"default is a rule in words but {where} is the literal {parsed!r}"]
    return [f"default stated {lit.value!r}, {where} is {parsed!r}"]


def _check_option(dump: Dump, ref: FlagRef, default: Scalar | None, rule: str, meaning: str) -> list[str]:
    entry = dump.option(ref.name)
    if entry is None:
        _, why = dump.resolve(ref.name)
        return [f"{ref.name} is not an option of {dump.label} ({why})"]
    out: list[str] = []
    if entry.get("deprecated") and "deprecated" not in meaning.lower():
        out.append(f"{ref.name} is deprecated in {dump.label} ({entry.get('help', '')}); say so in its meaning")
    valid = entry.get("choices") or dump.valid_values.get(entry["names"][0], {}).get("values")
    if ref.value is not None and valid and ref.value not in [str(c) for c in valid]:
        out.append(f"{ref.value} is not a choice of {ref.name} ({', '.join(str(c) for c in valid if c is not None)})")
    return out + _check_default(default, rule, entry.get("default"), "the parser's default")


def _check_config(dump: Dump, ref: FlagRef, default: Scalar | None, rule: str) -> list[str]:
    config = dump.configs.get(ref.name)
    if config is None:
        entry = dump.option(ref.name)
        if entry is None:
            return [f"{ref.name} is not an option of {dump.label}"]
        return [f"{dump.label} dump has no fields for {ref.name}"]
    spec = config["fields"].get(ref.key or "")
    if spec is None:
        return [f"{ref.key} is not a field of {ref.name} ({config['class']}) in {dump.label}"]
    out: list[str] = []
    choices = spec.get("choices")
    if ref.value is not None and choices and ref.value not in [str(c) for c in choices]:
        out.append(f"{ref.value} is not a choice of {ref.name} {ref.key} ({', '.join(str(c) for c in choices if c)})")
    return out + _check_default(default, rule, spec.get("default"), f"{config['class']}.{ref.key}'s default")


def check_flags(tech: Technique, file: str, flags_dir: Path = FLAGS_DIR, tools: Tools | None = None) -> list[Problem]:
    """Every flag entry of every engine against the dump of the version ``verified`` names."""
    tools = default_tools() if tools is None else tools
    problems: list[Problem] = []
    for engine, knobs in tech.knobs.items():
        for flag in knobs.flags:
            try:
                refs = flag_refs(engine, flag.flag, tools, env=flag.env, inside=flag.inside)
            except ValueError as exc:
                problems.append(Problem(file, flag.flag, engine, f"cannot check this flag text: {exc}"))
                continue
            defaults = _defaults(flag, len(refs))
            rule = flag.default_rule.en if flag.default_rule is not None else ""
            for ref, default in zip(refs, defaults):
                if ref.kind == "external":
                    continue
                dump, why = _dump_for(tech, ref.tool, flags_dir, tools)
                label = f"{_label(ref.tool, tools)} {_version_of(tech, ref.tool) or '?'}"
                if dump is None:
                    problems.append(Problem(file, flag.flag, label, why))
                    continue
                config = dump.configs.get(ref.name)
                if ref.kind == "option" and ref.value and config and ref.value.partition("=")[0] in config["fields"]:
                    key, _, value = ref.value.partition("=")
                    ref = FlagRef(ref.tool, "config", ref.name, key=key, value=value or None)
                if ref.kind == "env":
                    known = ref.name in dump.env
                    msgs = [] if known else [f"{ref.name} is not an environment variable {dump.label} reads"]
                elif ref.kind == "config":
                    msgs = _check_config(dump, ref, default, rule)
                else:
                    msgs = _check_option(dump, ref, default, rule, flag.meaning.en)
                problems.extend(Problem(file, flag.flag, dump.label, m) for m in msgs)
    return problems


# ---- example commands -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Command:
    """One command line of an example: the tool whose parser reads it, its arguments and NAME=VALUE prefix."""

    tool: str | None
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    text: str


def example_commands(example: str, tools: Tools | None = None) -> list[Command]:
    """The command lines of an example (comments and blank lines skipped, ``\\`` continuations joined)."""
    tools = default_tools() if tools is None else tools
    commands = [(prefix, t.id) for t in tools.values() for prefix in t.commands]
    lines: list[str] = []
    pending = ""
    for raw in example.splitlines():
        line = raw.rstrip()
        if pending:
            line = pending + " " + line.strip()
            pending = ""
        if line.endswith("\\"):
            pending = line[:-1].rstrip()
            continue
        if line.strip() and not line.strip().startswith("#"):
            lines.append(line.strip())
    if pending:
        lines.append(pending.strip())
    out: list[Command] = []
    for line in lines:
        tokens = shlex.split(line, comments=True)
        env: list[tuple[str, str]] = []
        while tokens and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", tokens[0]):
            name, _, value = tokens.pop(0).partition("=")
            env.append((name, value))
        tool = None
        for prefix, name in commands:
            if tuple(tokens[: len(prefix)]) == prefix:
                tool, tokens = name, tokens[len(prefix):]
                break
        out.append(Command(tool, tuple(tokens), tuple(env), line))
    return out


def _check_json(dump: Dump, option: str, raw: str) -> list[str]:
    config = dump.configs.get(option)
    if config is None:
        return []
    try:
        value = safe_load.load_json(raw, max_chars=64 * 1024)
    except TriageError as exc:
        return [f"{option} value is not JSON ({exc.reason})"]
    if not isinstance(value, dict):
        return [f"{option} value is not a JSON object"]
    out: list[str] = []
    for key, val in value.items():
        spec = config["fields"].get(key)
        if spec is None:
            out.append(f"{key} is not a field of {option} ({config['class']})")
            continue
        choices = spec.get("choices")
        if choices and isinstance(val, (str, int)) and not isinstance(val, bool) and val not in choices:
            shown = ", ".join(str(c) for c in choices if c is not None)
            out.append(f"{option} {key}={val!r} is not a choice ({shown})")
    return out


def check_argv(dump: Dump, argv: tuple[str, ...]) -> list[str]:
    """Flags of one command line against a dump, the way argparse/clap would read them (no engine needed)."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        token = argv[i]
        i += 1
        if not token.startswith("-") or token in ("-", "--"):
            continue
        name, eq, inline = token.partition("=")
        if dump.tool == "vllm" and re.match(r"^-O\d$", name):  # vLLM's -O<n> shorthand for --optimization-level
            continue
        if dump.tool == "vllm" and name.startswith("--") and "." in name:  # --compilation-config.mode=…
            base, _, key = name.partition(".")
            config = dump.configs.get(base)
            if config is None or key.split(".")[0] not in config["fields"]:
                out.append(f"{name}: {key} is not a field of {base}")
            if not eq:
                i += 1
            continue
        entry, why = dump.resolve(name)
        if entry is None:
            out.append(why)
            continue
        if entry.get("deprecated"):
            out.append(f"{name} is deprecated in {dump.label}")
        if not entry.get("takes_value"):
            continue
        nargs = entry.get("nargs")
        values: list[str] = []
        if eq:
            values = [inline]
        elif nargs in ("+", "*"):
            while i < len(argv) and not argv[i].startswith("-"):
                values.append(argv[i])
                i += 1
        elif nargs == "?":
            if i < len(argv) and not argv[i].startswith("-"):
                values, i = [argv[i]], i + 1
        else:
            count = nargs if isinstance(nargs, int) else 1
            values, i = list(argv[i:i + count]), i + count
            if len(values) < count:
                out.append(f"{name} expects a value")
        valid = entry.get("choices") or dump.valid_values.get(entry["names"][0], {}).get("values")
        for value in values:
            if valid and value not in [str(c) for c in valid if c is not None]:
                shown = ", ".join(str(c) for c in valid if c is not None)
                out.append(f"{name} {value}: not a choice ({shown})")
            out.extend(_check_json(dump, entry["names"][0], value))
    return out


def check_examples(tech: Technique, file: str, flags_dir: Path = FLAGS_DIR,
                   tools: Tools | None = None) -> list[Problem]:
    tools = default_tools() if tools is None else tools
    problems: list[Problem] = []
    for engine, knobs in tech.knobs.items():
        for cmd in example_commands(knobs.example, tools):
            if cmd.tool is None:
                problems.append(Problem(file, f"example ({engine})", "?", f"no parser dump for: {cmd.text[:80]}"))
                continue
            dump, why = _dump_for(tech, cmd.tool, flags_dir, tools)
            if dump is None:
                problems.append(Problem(file, f"example ({engine})", cmd.tool, why))
                continue
            msgs = check_argv(dump, cmd.argv)
            prefixes = tools[cmd.tool].env_prefixes
            for name, _ in cmd.env:
                known = name in dump.env or name in ("CUDA_VISIBLE_DEVICES",)
                if not known and name.startswith(prefixes):
                    msgs.append(f"{name} is not an environment variable {dump.label} reads")
            problems.extend(Problem(file, f"example ({engine}) `{cmd.text[:60]}`", dump.label, m) for m in msgs)
    return problems


# ---- published claims -------------------------------------------------------------------------------------------


def well_formed_paper(ref: str) -> bool:
    """``arXiv:2403.02310`` (optionally ``v3``) or a DOI ``10.NNNN/...``. New-style arXiv ids have a valid
    YYMM and, from 1501 on, five digits after the dot (four before)."""
    if DOI_RE.match(ref):
        return True
    m = ARXIV_RE.match(ref)
    if not m:
        return False
    new_style = re.match(r"^(\d{2})(\d{2})\.(\d+)$", m.group(1))
    if not new_style:
        return True  # old style, e.g. hep-th/9901001
    yy, mm, number = new_style.groups()
    return 1 <= int(mm) <= 12 and len(number) == (5 if int(yy + mm) >= 1501 else 4)


def check_claims(tech: Technique, file: str) -> list[Problem]:
    problems: list[Problem] = []
    for gain in tech.expected_gain.published:
        for ref in gain.papers:
            if not well_formed_paper(ref):
                problems.append(Problem(file, f"claim '{gain.source}'", "paper", f"'{ref}' is not an arXiv id or DOI"))
        if not gain.papers and VENUE_RE.search(gain.source) and not gain.url:
            problems.append(Problem(file, f"claim '{gain.source}'", "paper",
                                    "a paper's claim needs its arXiv id or DOI"))
    return problems


def check_technique(tech: Technique, file: str, flags_dir: Path = FLAGS_DIR,
                    tools: Tools | None = None) -> list[Problem]:
    return (check_flags(tech, file, flags_dir, tools) + check_examples(tech, file, flags_dir, tools)
            + check_claims(tech, file))


def versions_line(verified: Mapping[Tool, str], sep: str = ", ", tools: Tools | None = None) -> str:
    """``vLLM 0.33.0, SGLang 0.5.23, …`` in the launchers' order, for the page's "flags as of" line."""
    tools = default_tools() if tools is None else tools
    return sep.join(f"{t.label} {verified[t.id]}" for t in tools.values() if t.id in verified)


def paper_url(ref: str) -> str:
    """The landing page of an arXiv id or DOI."""
    if ref.startswith("arXiv:"):
        return f"https://arxiv.org/abs/{ref.removeprefix('arXiv:')}"
    return f"https://doi.org/{ref}"
