"""Fleet causes (issue 28): the fleet signals' arithmetic over the replicas' own signals (one replica is never a
healthy fleet: not measurable), and fleets of simulated vLLM replicas, each read through the /metrics scrape path,
that light their fleet node with its evidence: a straggler on a slow node, a router sending one replica most of the
traffic, every replica saturated together."""

from __future__ import annotations

import pytest

from triage.diagnosis.fleet import FleetRow, fleet_diagnosis
from triage.diagnosis.fleet_signals import Replica, fleet_signals
from triage.diagnosis.rules import resolve_slo
from triage.diagnosis.signals import SignalSet
from triage.diagnosis.window import diagnose_window
from triage.knowledge.messages import message_text
from triage.sources.metrics.exposition import parse_metrics_text
from triage.sources.metrics.simulator import Simulator
from triage.sources.metrics.snapshot_window import SnapshotWindow

FLEET_SIGNALS = ["fleet_ttft_p99_max_s", "fleet_tpot_p99_max_s", "replica_ttft_p99_over_median",
                 "replica_tpot_p99_over_median", "slowest_rate_over_median", "queue_spread", "kv_usage_spread",
                 "req_rate_max_over_median", "inflight_max_over_median", "saturated_share"]


def replica(kb, name: str, model: str | None = None, **values: float) -> Replica:
    signals = SignalSet("server")
    for key, value in values.items():
        signals.put(kb, key, value, "test")
    labels = {"instance": name, **({"model_name": model} if model else {})}
    return Replica(labels, signals)


def values(kb, *replicas: Replica) -> dict[str, float]:
    return {k: float(s.value) for k, s in fleet_signals(kb, replicas).values.items()}


def test_every_fleet_signal_is_declared_with_its_recipe(kb):
    assert [n for n, s in kb.signals.items() if s.fleet is not None] == FLEET_SIGNALS
    assert all(set(kb.signals[n].sources) == {"fleet"} and kb.signals[n].recipe is None for n in FLEET_SIGNALS)


def test_one_replica_is_not_measurable_never_healthy(kb):
    one = replica(kb, "a", ttft_p99_s=9.0, tpot_p99_s=0.5, req_per_s=3, waiting_mean=40, kv_usage_mean=0.99,
                  kv_usage_max=1.0)
    assert values(kb, one) == {}
    diag = fleet_diagnosis(kb, [FleetRow(one.labels, _live(kb, one.signals))], resolve_slo(kb))
    assert diag.empty.startswith("1 replica(s) with traffic") and not diag.findings
    assert [(c.symptom, c.present) for c in diag.symptoms] == [("fleet", None)]  # not measurable, not "absent"
    assert values(kb) == {}


def test_spread_share_and_max_over_median(kb):
    fleet = [replica(kb, "a", waiting_mean=12, kv_usage_mean=0.9, kv_usage_max=0.95, req_per_s=6),
             replica(kb, "b", waiting_mean=0, kv_usage_mean=0.2, kv_usage_max=0.3, req_per_s=2),
             replica(kb, "c", waiting_mean=0.5, kv_usage_mean=0.1, kv_usage_max=0.2, req_per_s=1),
             replica(kb, "d")]  # measures nothing: out of every count
    got = values(kb, *fleet)
    assert got["queue_spread"] == pytest.approx(12.0)
    assert got["kv_usage_spread"] == pytest.approx(0.8)
    assert got["req_rate_max_over_median"] == pytest.approx(3.0)  # 6 ÷ median(6, 2, 1)
    assert got["saturated_share"] == pytest.approx(1 / 3)
    src = fleet_signals(kb, fleet).values
    assert "instance=a (12) − of instance=b (0), over 3 replicas" in message_text(src["queue_spread"].source, "en")
    assert message_text(src["saturated_share"].source, "en").endswith(
        "1 of 3 replicas with waiting_mean >= 1 or kv_usage_max >= 0.9: instance=a")


@pytest.mark.parametrize("waiting", [[0, 0], [5, 7], [40, 40, 40]])
def test_a_share_stays_within_zero_and_one(kb, waiting):
    got = values(kb, *(replica(kb, str(i), waiting_mean=w) for i, w in enumerate(waiting)))
    assert 0.0 <= got["saturated_share"] <= 1.0
    assert got["saturated_share"] == (1.0 if min(waiting) >= 1 else 0.0)
    assert got["queue_spread"] == max(waiting) - min(waiting)


def test_peer_ratio_against_the_others_median_of_the_same_model(kb):
    fleet = [replica(kb, "a", "m1", ttft_p99_s=0.2, req_per_s=5), replica(kb, "b", "m1", ttft_p99_s=0.3, req_per_s=5),
             replica(kb, "c", "m1", ttft_p99_s=1.0, req_per_s=4),
             replica(kb, "d", "m2", ttft_p99_s=50.0, req_per_s=40)]  # another model: alone, no peer
    got = values(kb, *fleet)
    # c against the median of a and b (0.25), not against itself nor the other model's replica
    assert got["replica_ttft_p99_over_median"] == pytest.approx(4.0)
    assert got["slowest_rate_over_median"] == pytest.approx(0.8)  # c's 4 req/s ÷ median(5, 5)
    assert got["fleet_ttft_p99_max_s"] == 50.0
    two = values(kb, replica(kb, "a", ttft_p99_s=0.5, req_per_s=1), replica(kb, "b", ttft_p99_s=2.0, req_per_s=1))
    assert two["replica_ttft_p99_over_median"] == pytest.approx(4.0)  # two replicas: the other one is the median


def test_each_peer_median_is_the_median_of_the_others_values(kb):
    """The peer medians come from one sorted pool per model with the replica's own value taken out: each equals
    statistics.median over the other replicas of its model (over every other replica when it has no model label),
    with ties, even and odd counts, a replica alone with its model, and one measuring nothing."""
    from statistics import median

    from triage.diagnosis.fleet_signals import _peer_ratios

    rates = [("a", "m1", 2.0), ("b", "m1", 2.0), ("c", "m1", 5.0), ("d", "m1", 1.0), ("e", "m2", 3.0),
             ("f", None, 4.0), ("g", None, 2.0), ("h", "m3", 7.0), ("i", "m1", None)]
    fleet = [replica(kb, name, model, **({"req_per_s": v} if v is not None else {})) for name, model, v in rates]
    got = {r.labels["instance"]: pr for r in fleet if (pr := _peer_ratios(fleet, "req_per_s").get(id(r)))}
    want = {}
    for name, model, v in rates:
        peers = [pv for other, om, pv in rates if other != name and pv is not None and (model is None or om == model)]
        if v is not None and peers and median(peers) > 0:
            want[name] = (v / median(peers), median(peers), len(peers))
    assert got == want and set(got) == {"a", "b", "c", "d", "f", "g"}  # e and h are alone with their model


def test_a_replica_with_too_little_traffic_is_no_straggler(kb):
    """A p99 over a handful of requests is noise: replicas finishing under the guard's 0.1 requests/s are left out of
    the peer comparison (and out of the median), in Python and in the rule export's PromQL."""
    from triage.alerting.export import build
    from triage.diagnosis.rules import resolve_slo

    fleet = [replica(kb, "a", ttft_p99_s=0.2, tpot_p99_s=0.02, req_per_s=5),
             replica(kb, "b", ttft_p99_s=0.3, tpot_p99_s=0.03, req_per_s=5),
             replica(kb, "c", ttft_p99_s=0.25, tpot_p99_s=0.025, req_per_s=5),
             replica(kb, "idle", ttft_p99_s=30.0, tpot_p99_s=0.5, req_per_s=0.02)]
    got = values(kb, *fleet)
    assert got["replica_ttft_p99_over_median"] == pytest.approx(0.3 / 0.225)  # b over a and c; idle not compared
    assert got["slowest_rate_over_median"] == pytest.approx(1.0)
    busy = values(kb, *fleet[:3], replica(kb, "slow", ttft_p99_s=30.0, tpot_p99_s=0.5, req_per_s=5))
    assert busy["replica_ttft_p99_over_median"] == pytest.approx(120.0)  # the same replica with traffic: 30 ÷ 0.25
    rules = build(kb, resolve_slo(kb)).rule_file()["groups"][0]["rules"]
    record = next(r["expr"] for r in rules if r.get("record", "").startswith("triage:replica_ttft_p99_over_median:"))
    assert "triage:req_per_s:15m >= 0.1" in record and ">= 3" in record


def test_a_zero_median_leaves_a_ratio_unmeasured(kb):
    got = values(kb, replica(kb, "a", req_per_s=0.0), replica(kb, "b", req_per_s=0.0), replica(kb, "c", req_per_s=2))
    assert "req_rate_max_over_median" not in got


def test_fleet_symptom_and_causes_read_fleet_signals_only(kb):
    """A replica's own diagnosis never judges the fleet symptom, and the fleet's never judges a replica symptom."""
    fleet = next(s for s in kb.symptoms if s.id == "fleet")
    assert fleet.scope == "fleet" and {c.id for c in fleet.causes} == {
        "fleet.straggler", "fleet.routing_skew", "fleet.out_of_capacity", "fleet.cache_blind_routing"}
    assert kb.causes["fleet.cache_blind_routing"].rule is None  # no metric gives the traffic's shared prefixes
    for cause in fleet.causes:
        assert cause.title.zh and cause.question.zh and cause.techniques
        for cond in cause.rule.evidence if cause.rule else []:
            assert kb.signals[cond.signal].fleet is not None


def _live(kb, signals: SignalSet):
    from triage.diagnosis.rules import diagnose
    from triage.diagnosis.window import LiveDiagnosis
    from triage.sources.readings import Readings

    return LiveDiagnosis(diagnose(kb, signals, resolve_slo(kb)), Readings(), "vllm")


# ---- simulated fleets through the scrape path ------------------------------------------------------------------
MINUTES, STEP = 5, 15.0
SLOW_NODE = {"step_base_s": 0.03, "step_per_seq_s": 0.0003, "prefill_per_token_s": 0.00018}  # 3× slower steps
FLEETS = {
    # four healthy replicas with the same traffic, one on a node three times slower
    "straggler": ("interactive", [("healthy", {}), ("healthy", {}), ("healthy", {}), ("healthy", SLOW_NODE)]),
    # the router sends one replica 10 req/s and the three others 1 req/s each
    "skew": ("chat", [("queueing", {}), ("queueing", {"rate": 1.0}), ("queueing", {"rate": 1.0}),
                      ("queueing", {"rate": 1.0})]),
    # three replicas, each over its capacity
    "out_of_capacity": ("chat", [("queueing", {}), ("queueing", {}), ("queueing", {})]),
}
LIT = {"straggler": "fleet.straggler", "skew": "fleet.routing_skew", "out_of_capacity": "fleet.out_of_capacity"}
DECIDING = {"straggler": "replica_tpot_p99_over_median", "skew": "req_rate_max_over_median",
            "out_of_capacity": "saturated_share"}


def _scrapes(scenario: str, overrides: dict, seed: int) -> list:
    sim = Simulator(scenario, seed=seed, overrides=overrides)
    snaps = []
    for _ in range(int(MINUTES * 60 / STEP) + 1):
        snaps.append(parse_metrics_text(sim.render(), sim.now, scenario))
        sim.advance(STEP)
    return snaps


# The tests reading the simulated fleets share one xdist worker (--dist loadgroup), so the module fixture simulates
# the eleven replicas once per run, not once on each worker.
ON_ONE_WORKER = pytest.mark.xdist_group("simulated-fleets")


@pytest.fixture(scope="module")
def fleets(kb):
    out = {}
    for name, (slo_name, members) in FLEETS.items():
        slo = resolve_slo(kb, slo_name)
        rows = [FleetRow({"instance": f"{name}-{i}"}, diagnose_window(kb, SnapshotWindow(_scrapes(sc, over, i)), slo))
                for i, (sc, over) in enumerate(members)]
        out[name] = (rows, fleet_diagnosis(kb, rows, slo))
    return out


@ON_ONE_WORKER
@pytest.mark.parametrize("name", list(FLEETS))
def test_each_simulated_fleet_lights_its_own_node(fleets, name):
    rows, diag = fleets[name]
    assert [c.present for c in diag.symptoms] == [True]
    assert diag.matched_ids == [LIT[name]], [(f.cause, [(e.signal, e.value, e.holds) for e in f.evidence])
                                             for f in diag.findings]
    finding = diag.findings[0]
    held = {e.signal: e for e in finding.evidence if e.holds}
    assert DECIDING[name] in held and held[DECIDING[name]].source  # the evidence says how it was measured
    assert not diag.empty and finding.techniques


@ON_ONE_WORKER
def test_the_straggler_is_named_with_its_peers(fleets):
    _, diag = fleets["straggler"]
    ev = {e.signal: e for e in diag.findings[0].evidence}
    assert "instance=straggler-3" in message_text(ev["replica_tpot_p99_over_median"].source, "zh")
    assert ev["slowest_rate_over_median"].value == pytest.approx(1.0, abs=0.2)  # same traffic as its peers
    assert diag.findings[0].techniques == ["scale_out"]


@ON_ONE_WORKER
def test_skew_is_not_a_straggler_and_capacity_is_not_skew(fleets):
    _, skew = fleets["skew"]
    sig = skew.signals.values
    assert sig["replica_ttft_p99_over_median"].value >= 3  # the hot replica is slow…
    assert sig["slowest_rate_over_median"].value >= 1.5  # …because it gets more traffic: not its node
    _, full = fleets["out_of_capacity"]
    assert full.signals.values["saturated_share"].value == 1.0
    assert full.signals.values["queue_spread"].value < 4


@ON_ONE_WORKER
def test_replica_diagnoses_are_unchanged_by_the_fleet(fleets, kb):
    """Each row keeps its own diagnosis (no fleet symptom in it): the hot replica of the skewed fleet queues."""
    rows, _ = fleets["skew"]
    assert "ttft.queueing" in rows[0].diagnosis.matched_ids
    assert all(c.symptom != "fleet" for r in rows for c in r.diagnosis.symptoms)


@ON_ONE_WORKER
def test_every_fleet_provenance_reads_in_chinese(fleets):
    """How each fleet signal was measured is a message with a template in both languages (the views show it in
    中文)."""
    sources = {s.source for _, diag in fleets.values() for s in diag.signals.values.values()}
    assert len(sources) > 10
    for source in sources:
        assert message_text(source, "zh") != message_text(source, "en"), source


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_fleet_alert_link_opens_its_branch(kb, lang):
    """A fleet alert's runbook link (/?node=fleet.routing_skew) opens the Diagnose page on that node: its question
    and its technique, in either language."""
    from tests.apptest_tools import new_app, texts

    at = new_app(node="fleet.routing_skew", lang=lang).run()
    assert not at.exception, at.exception
    shown = texts(at)
    cause = kb.causes["fleet.routing_skew"]
    assert cause.question.get(lang) in shown
    assert kb.techniques["prefix_aware_routing"].title.get(lang) in shown or "prefix_aware_routing" in shown


def test_a_replica_symptom_cannot_read_a_fleet_signal(tiny_tree):
    """A fleet signal means nothing for one replica: the loader refuses it under a replica symptom, and a fleet
    recipe reading another fleet signal, each by file and key."""
    from tests.conftest import edit_yaml
    from triage.errors import TriageError
    from triage.knowledge.loader import load_knowledge

    edit_yaml(tiny_tree / "tree.yaml", lambda d: d["symptoms"][0]["trigger"].append(
        {"signal": "queue_spread", "op": ">=", "value": 4, "meaning": {"en": "x", "zh": "x"}}))
    with pytest.raises(TriageError) as err:
        load_knowledge(tiny_tree)
    assert "a replica symptom's conditions read replica signals, not fleet ones" in err.value.line()
    assert "ttft.trigger[1]" in err.value.line()
    edit_yaml(tiny_tree / "tree.yaml", lambda d: d["symptoms"][0]["trigger"].pop())
    edit_yaml(tiny_tree / "signals.yaml", lambda d: next(s for s in d["signals"] if s["name"] == "queue_spread")
              .update(fleet={"spread": "kv_usage_spread"}))
    with pytest.raises(TriageError) as err:
        load_knowledge(tiny_tree)
    assert "fleet recipe of 'queue_spread' reads 'kv_usage_spread', which is not a replica signal" in err.value.line()
