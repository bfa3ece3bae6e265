"""lint-rules / lint-dashboard: metric names that no longer exist, in real public dashboards and rule files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from tests.cli_tools import run_triage
from tests.prom_harness import PROMETHEUS, PROMTOOL, data_end, start_prometheus
from triage.cli import main
from triage.knowledge import DEFAULT_TREE_DIR
from triage.lint.promql_names import label_values_query, metric_names

ROOT = Path(__file__).resolve().parent.parent
DASHBOARDS = ROOT / "tests" / "fixtures" / "real" / "dashboards"
RULES = ROOT / "tests" / "fixtures" / "lint" / "stale-rules.yaml"


def lint(capsys, *args: str) -> tuple[int, dict]:
    code = main([*args, "--json"])
    out = capsys.readouterr()
    assert out.err == ""
    return code, json.loads(out.out)


def findings(report: dict) -> dict[str, dict]:
    return {f["name"]: f for file in report["files"] for f in file["findings"]}


# ------------------------------------------------------------------ the PromQL tokenizer


@pytest.mark.parametrize(("expr", "names"), [
    ('histogram_quantile(0.99, sum by(le) (rate(vllm:ttft_bucket{model_name="$model_name"}[$__rate_interval])))',
     ["vllm:ttft_bucket"]),
    ('{__name__="sglang:token_usage", job=~"a|b"} / on(instance) group_left(model) foo offset 5m',
     ["sglang:token_usage", "foo"]),
    ('sum without (pod) (rate(x_total[5m:1m])) * ignoring(a, b) y + label_replace(z, "d", "$1", "s", "(.*)")',
     ["x_total", "y", "z"]),
    ('a and bool_metric or vector(0) unless b # c_commented\n> 1e3 + 0x1f + Inf', ["a", "bool_metric", "b"]),
    ('count by (le) (m{label="}{not a name", other=~`x`}) > bool 2', ["m"]),
    ('topk(5, ${metric_var}) + [[old_var]] + $var', []),
    ('{"my.metric", job="x"} + rate({"vllm:x_total", engine="0"}[5m])', ["my.metric", "vllm:x_total"]),
])
def test_metric_names_skips_everything_but_names(expr, names):
    assert metric_names(expr) == names


def test_template_queries_name_the_metric_not_the_label():
    assert label_values_query("label_values(vllm:num_requests_running, model_name)") == ["vllm:num_requests_running"]
    assert label_values_query("label_values(model_name)") == []
    assert label_values_query('query_result(max(up{job="x"}))') == ["up"]


# ------------------------------------------------------------------ public dashboards


def test_vllm_classic_example_dashboard(capsys):
    code, report = lint(capsys, "lint-dashboard", str(DASHBOARDS / "vllm-prometheus-grafana-e88892c9.excerpt.json"))
    found = findings(report)
    assert code == 1
    assert found["vllm:gpu_cache_usage_perc"]["replacement"] == "vllm:kv_cache_usage_perc"
    assert found["vllm:gpu_cache_usage_perc"]["version"] == "deprecated 0.9.2, removed in 0.12.0"
    tpot = found["vllm:time_per_output_token_seconds_bucket"]
    assert tpot["replacement"] == "vllm:inter_token_latency_seconds_bucket"
    assert len(found["vllm:time_per_output_token_seconds_bucket"]["where"]) == 4  # P99, P95, P90, P50
    assert found["vllm:num_requests_swapped"]["kind"] == "removed"
    assert found["vllm:cpu_cache_usage_perc"]["kind"] == "removed"
    assert "vllm:kv_cache_usage_perc" not in found and "vllm:time_to_first_token_seconds_bucket" not in found


def test_production_stack_dashboards(capsys):
    code, report = lint(capsys, "lint-dashboard", str(DASHBOARDS / "production-stack-vllm-dashboard.json"),
                        str(DASHBOARDS / "production-stack-eks-vllm-dashboard.json"))
    helm, eks = ({f["name"]: f for f in file["findings"]} for file in report["files"])
    assert code == 1
    assert set(helm) == {"vllm:gpu_prefix_cache_hits_total", "vllm:gpu_prefix_cache_queries_total"}
    assert helm["vllm:gpu_prefix_cache_hits_total"]["replacement"] == "vllm:prefix_cache_hits_total"
    assert "production-stack router" in helm["vllm:gpu_prefix_cache_hits_total"]["note"]  # may be the router's
    assert {"vllm:gpu_cache_usage_perc", "vllm:time_per_output_token_seconds_sum",
            "vllm:num_requests_swapped"} <= set(eks)


def test_llm_d_dashboards(capsys):
    code, report = lint(capsys, "lint-dashboard",
                        str(DASHBOARDS / "llm-d-performance-kv-cache-b7c6ffc2.excerpt.json"),
                        str(DASHBOARDS / "llm-d-failure-saturation-6b7ac826.excerpt.json"))
    old, current = ({f["name"]: f for f in file["findings"]} for file in report["files"])
    assert code == 1
    assert old["inference_pool_ready_pods"]["replacement"] == "llm_d_epp_ready_endpoints"
    assert old["inference_pool_average_kv_cache_utilization"]["version"].endswith("still emitted as an alias")
    assert "vllm:time_per_output_token_seconds_bucket" in old
    assert set(current) == {"vllm:num_preemptions"}  # its llm_d_epp_* names are current
    assert current["vllm:num_preemptions"]["replacement"] == "vllm:num_preemptions_total"


def test_targets_of_other_data_sources_are_not_promql(tmp_path, capsys):
    board = tmp_path / "mixed.json"
    board.write_text(json.dumps({"panels": [
        {"title": "logs", "datasource": {"type": "loki"},
         "targets": [{"expr": 'sum by (level) (count_over_time({app="x"} | json [5m]))'}]},
        {"title": "kv", "datasource": {"type": "prometheus"},
         "targets": [{"expr": "vllm:gpu_cache_usage_perc"},
                     {"datasource": {"type": "loki"}, "expr": "rate({app=\"y\"} | logfmt [1m])"}]},
    ]}), encoding="utf-8")
    code, report = lint(capsys, "lint-dashboard", str(board))
    assert code == 1 and set(findings(report)) == {"vllm:gpu_cache_usage_perc"}  # neither json nor logfmt
    assert report["files"][0]["expressions"] == 1


def test_nested_rows_annotations_and_the_api_wrapper_are_read(tmp_path, capsys):
    board = tmp_path / "api.json"
    board.write_text(json.dumps({"meta": {}, "dashboard": {
        "panels": [{"type": "row", "title": "collapsed", "collapsed": True, "panels": [
            {"title": "inner", "targets": [{"expr": "sglang:time_per_output_token_seconds_count"}]}]}],
        "rows": [{"panels": [{"title": "old schema", "targets": [{"expr": "vllm:cpu_cache_usage_perc"}]}]}],
        "annotations": {"list": [{"name": "preempt", "expr": "changes(vllm:gpu_prefix_cache_hit_rate[1m]) > 0"}]},
        "templating": {"list": [{"type": "query", "name": "m",
                                 "query": "label_values(vllm:gpu_cache_usage_perc{job=~\"$job\"}, model_name)"}]},
    }}), encoding="utf-8")
    code, report = lint(capsys, "lint-dashboard", str(board))
    found = findings(report)
    assert code == 1
    assert found["sglang:time_per_output_token_seconds_count"]["where"] == ["panel 'inner'"]
    assert found["vllm:cpu_cache_usage_perc"]["where"] == ["panel 'old schema'"]
    assert found["vllm:gpu_prefix_cache_hit_rate"]["where"] == ["annotation 'preempt'"]
    assert found["vllm:gpu_cache_usage_perc"]["where"] == ["variable $m"]


def test_clean_dashboard_exits_zero_with_a_line(capsys):
    code = main(["lint-dashboard", str(DASHBOARDS / "sglang-monitoring-grafana-f32b0841.excerpt.json")])
    out = capsys.readouterr().out
    assert code == 0 and "11 expression(s), no stale names" in out


# ------------------------------------------------------------------ rule files


def test_rule_file_lists_renames_across_engines(capsys):
    code = main(["lint-rules", str(RULES)])
    out = capsys.readouterr().out
    assert code == 1
    for name, instead in [("vllm:gpu_cache_usage_perc", "vllm:kv_cache_usage_perc"),
                          ("sglang:time_per_output_token_seconds_bucket", "sglang:inter_token_latency_seconds_bucket"),
                          ("inference_extension_flow_control_queue_size", "llm_d_epp_flow_control_queue_size"),
                          ("llm_d_router_epp_average_queue_size", "llm_d_epp_average_queue_size")]:
        line = next(x for x in out.splitlines() if x.startswith(name + " "))
        assert instead in line
    # llm-d-router PR 1071 deprecated the GAIE names; PR 1661 (EPP) and PR 2385 (kv-cache) renamed llm_d_router_epp_
    by_name = {x.split()[0]: x for x in out.splitlines() if x.strip()}
    assert "deprecated llm-d-router PR 1071" in by_name["inference_extension_flow_control_queue_size"]
    assert "removed in llm-d-router PR 1661 (kv-cache index series: PR 2385)" in by_name[
        "llm_d_router_epp_average_queue_size"]
    assert "job:vllm_kv_usage:max " not in out and "vllm:prompt_tokens_total " not in out


def test_prometheus_rule_resource_is_read(tmp_path, capsys):
    resource = tmp_path / "rule.yaml"
    resource.write_text("apiVersion: monitoring.coreos.com/v1\nkind: PrometheusRule\nmetadata: {name: x}\nspec:\n"
                        "  groups:\n  - name: g\n    rules:\n    - alert: A\n"
                        "      expr: vllm:gpu_cache_usage_perc > 0.9\n",
                        encoding="utf-8")
    code, report = lint(capsys, "lint-rules", str(resource))
    assert code == 1 and findings(report)["vllm:gpu_cache_usage_perc"]["where"] == ["g / A"]


@pytest.mark.parametrize(("command", "content", "message"), [
    ("lint-dashboard", "", "is empty"),
    ("lint-dashboard", "{not json", "not valid JSON"),
    ("lint-dashboard", '{"title": "no panels"}', "not a Grafana dashboard"),
    ("lint-dashboard", '{"panels": [{"title": "text", "type": "text"}]}', "has no Prometheus queries"),
    ("lint-rules", "groups: [unclosed", "not valid YAML"),
    ("lint-rules", "rules: []", "not a Prometheus rule file"),
    ("lint-rules", "groups: []", "has no rules"),
])
def test_unreadable_input_is_exit_2_with_one_line(tmp_path, capsys, command, content, message):
    path = tmp_path / "input"
    path.write_text(content, encoding="utf-8")
    assert main([command, str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and "Traceback" not in err


def test_a_directory_or_missing_file_is_exit_2(tmp_path):
    for target in (tmp_path, tmp_path / "absent.json"):
        out = run_triage("lint-dashboard", str(target))
        assert out.returncode == 2 and out.stderr.count("\n") == 1 and str(target) in out.stderr


# ------------------------------------------------------------------ against a real Prometheus


def _openmetrics(end: int) -> str:
    """Names as a Prometheus fed through a colon-translating path holds them: sglang_* with underscores."""
    lines = []
    for name, kind in [("sglang_cache_hit_rate", "gauge"), ("sglang:max_total_num_tokens", "gauge"),
                       ("vllm:num_requests_running", "gauge")]:
        lines.append(f"# TYPE {name} {kind}")
        lines += [f'{name}{{instance="a"}} 1 {t}' for t in range(end - 300, end + 1, 15)]
    lines.append("# TYPE sglang_e2e_request_latency_seconds histogram")
    for t in range(end - 300, end + 1, 15):
        lines += [f'sglang_e2e_request_latency_seconds_bucket{{le="+Inf"}} 1 {t}',
                  f"sglang_e2e_request_latency_seconds_sum 1 {t}", f"sglang_e2e_request_latency_seconds_count 1 {t}"]
    return "\n".join([*lines, "# EOF"]) + "\n"


@pytest.fixture(scope="module")
def escaped_prometheus(tmp_path_factory):
    if not (Path(PROMETHEUS).exists() and Path(PROMTOOL).exists()):
        pytest.skip("prometheus / promtool are not installed")
    end = data_end()
    server = start_prometheus(tmp_path_factory.mktemp("lint"), _openmetrics(end), end)
    yield server
    server.stop()


def test_prometheus_check_names_missing_and_escaped_names(escaped_prometheus, capsys):
    code, report = lint(capsys, "lint-dashboard", str(DASHBOARDS / "sglang-monitoring-grafana-f32b0841.excerpt.json"),
                        "--prometheus", escaped_prometheus.url)
    found = findings(report)
    assert code == 1 and report["checked_against_prometheus"] is True
    assert found["sglang:cache_hit_rate"]["kind"] == "escaped"
    assert found["sglang:cache_hit_rate"]["replacement"] == "sglang_cache_hit_rate"
    e2e = found["sglang:e2e_request_latency_seconds_bucket"]
    assert e2e["replacement"] == "sglang_e2e_request_latency_seconds_bucket"
    assert found["sglang:max_running_requests"]["kind"] == "missing"
    assert found["sglang:cached_token"]["kind"] == "missing"
    assert "sglang:max_total_num_tokens" not in found  # stored under its own name


def test_prometheus_check_keeps_the_rename_and_notes_absence(escaped_prometheus, capsys):
    code, report = lint(capsys, "lint-rules", str(RULES), "--prometheus", escaped_prometheus.url)
    found = findings(report)
    assert code == 1
    assert found["vllm:gpu_cache_usage_perc"]["kind"] == "renamed"
    assert "absent from this Prometheus" in found["vllm:gpu_cache_usage_perc"]["note"]
    assert "job:vllm_kv_usage:max" not in found  # recorded by the file itself


def test_a_series_recorded_by_another_file_is_not_missing(escaped_prometheus, tmp_path, capsys):
    user = tmp_path / "alerts.yaml"
    user.write_text("groups:\n- name: a\n  rules:\n  - alert: Full\n    expr: job:vllm_kv_usage:max > 0.9"
                    " unless on () ALERTS{alertname=\"Maintenance\"}\n", encoding="utf-8")
    code, report = lint(capsys, "lint-rules", str(user), "--prometheus", escaped_prometheus.url)
    assert code == 1 and set(findings(report)) == {"job:vllm_kv_usage:max"}  # alone, nobody records it
    code, report = lint(capsys, "lint-rules", str(RULES), str(user), "--prometheus", escaped_prometheus.url)
    assert "job:vllm_kv_usage:max" not in findings(report)


def test_unreachable_prometheus_is_exit_2(capsys):
    from tests.prom_harness import closed_port_url

    assert main(["lint-rules", str(RULES), "--prometheus", closed_port_url(), "--timeout", "2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unreachable" in err


# ------------------------------------------------------------------ the history is data, checked on load


def test_dynamo_history(tmp_path, capsys):
    rules = tmp_path / "dynamo.yaml"
    rules.write_text("groups:\n- name: d\n  rules:\n  - alert: X\n"
                     "    expr: rate(nv_llm_http_service_requests_total[5m]) > 1"
                     " and dynamo_component_concurrent_requests > 3\n", encoding="utf-8")
    code, report = lint(capsys, "lint-rules", str(rules))
    found = findings(report)
    assert code == 1
    assert found["nv_llm_http_service_requests_total"]["replacement"] == "dynamo_frontend_requests_total"
    assert found["dynamo_component_concurrent_requests"]["replacement"] == "dynamo_component_inflight_requests"


def test_a_history_added_to_a_tree_copy_is_used(tmp_path, capsys):
    tree = tmp_path / "tree"
    shutil.copytree(DEFAULT_TREE_DIR, tree)
    path = tree / "engines" / "tgi.yaml"
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data["removed"] = [{"name": "tgi_old_thing", "removed_in": "9.9", "why": {"en": "gone", "zh": "已移除"}}]
    path.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    rules = tmp_path / "r.yaml"
    rules.write_text("groups:\n- name: g\n  rules:\n  - alert: A\n    expr: tgi_old_thing > 1\n", encoding="utf-8")
    assert main(["lint-rules", str(rules)]) == 0  # the shipped tree does not know it
    capsys.readouterr()
    code, report = lint(capsys, "lint-rules", str(rules), "--tree-dir", str(tree))
    assert code == 1 and findings(report)["tgi_old_thing"]["version"] == "removed in 9.9"


@pytest.mark.parametrize(("history", "message"), [
    ({"renamed": [{"old": "a", "new": "b"}, {"old": "a", "new": "c"}]}, "'a' is listed twice"),
    ({"renamed": [{"old": "a", "new": "b"}], "removed": [{"name": "b", "removed_in": "1", "why": {"en": "x",
                                                                                                  "zh": "x"}}]},
     "rename target 'b' is itself removed"),
    ({"renamed": [{"old": "not a name", "new": "b"}]}, "is not a Prometheus metric name"),
])
def test_inconsistent_history_fails_the_tree(tmp_path, history, message):
    tree = tmp_path / "tree"
    shutil.copytree(DEFAULT_TREE_DIR, tree)
    path = tree / "engines" / "tgi.yaml"
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data.update(history)
    path.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    out = run_triage("tree", "--tree-dir", str(tree))
    assert out.returncode == 2 and "tgi.yaml" in out.stderr and message in out.stderr


def test_router_maps_read_only_a_window_without_an_engine():
    """A router map is no serving engine (rules, knobs), and beside an engine's series the engine is read; a window
    of a router alone (its per-worker series) is read by the router's own map instead of refused."""
    from triage.errors import TriageError
    from triage.knowledge.engines import load_engines, serving_engines
    from triage.sources.metrics.snapshot_window import pick_engines

    engines = load_engines()
    assert {e.id for e in serving_engines(engines)} == {"vllm", "sglang", "tgi"}
    with pytest.raises(TriageError, match="no vLLM, SGLang or TGI metrics"):
        pick_engines({"node_load1"}, engines)
    alone, _ = pick_engines({"llm_d_epp_average_queue_size", "llm_d_epp_request_total"}, engines)
    assert alone.id == "llm_d_epp"
    serving, _ = pick_engines({"llm_d_epp_average_queue_size", "vllm:num_requests_running"}, engines)
    assert serving.id == "vllm"
    # the production-stack router re-exports vllm:num_requests_* per backend: with its own names beside them, it
    # is the router; with an engine-only name (KV usage) beside them, the engine
    router = {"vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:current_qps"}
    assert pick_engines(router, engines)[0].id == "production_stack_router"
    assert pick_engines(router | {"vllm:kv_cache_usage_perc"}, engines)[0].id == "vllm"


def test_notes_in_chinese(capsys):
    code, report = lint(capsys, "lint-dashboard", str(DASHBOARDS / "vllm-prometheus-grafana-e88892c9.excerpt.json"),
                        "--lang", "zh")
    assert code == 1 and "V1 没有 CPU swap" in findings(report)["vllm:num_requests_swapped"]["note"]
