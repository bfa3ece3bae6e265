"""Server-side signals from a metric window (scrapes or Prometheus): the recipes of tree/signals.yaml, plus rooflines.

Every server signal with a ``recipe`` is computed from it (triage/diagnosis/recipe_eval.py), the same definition the
PromQL rules compile, so a new server signal is a YAML entry. What stays in Python is what a recipe cannot say: the
rooflines (``decode_gb_per_step``, ``tpot_over_roofline``, triage/diagnosis/roofline.py), which look the served
model and the GPU up in tree/models.yaml and tree/gpus.yaml by a label's text and compute bytes per decode step from
the model's shape and dtypes (table look-ups and model arithmetic, not a ratio of readings); their label readings
are ROOFLINE_NEEDS.
"""

from __future__ import annotations

from collections.abc import Callable

from triage.diagnosis.recipe_eval import RecipeEvaluator, recipe_breakdowns, recipe_readings
from triage.diagnosis.roofline import Hardware, add_server_roofline
from triage.diagnosis.signals import SignalSet
from triage.knowledge.loader import KnowledgeBase
from triage.knowledge.messages import Msg
from triage.knowledge.model import Recipe
from triage.knowledge.needs import Need
from triage.sources.readings import Readings

DCGM = "dcgm"
# the labels the rooflines read: the served model, the KV cache's shape and dtype, the GPU DCGM names
ROOFLINE_NEEDS = [Need("info", "served_model"), Need("info", "cache_config"), Need("info", "gpu_info", engine=DCGM)]


def _recipes(kb: KnowledgeBase) -> list[Recipe]:
    return [sig.recipe for sig in kb.signals.values() if sig.recipe is not None]


def window_needs(kb: KnowledgeBase) -> list[Need]:
    """Every reading the server signals are computed from, once each: the recipes' in catalogue order, then the
    rooflines' labels."""
    found = [n for r in _recipes(kb) for n in recipe_readings(r)]
    return list(dict.fromkeys([*found, *ROOFLINE_NEEDS]))


def later_needs(kb: KnowledgeBase) -> list[Need]:
    """The readings only ``later`` alternatives name: asked in a second round, and only of windows that need them
    (the ITL quantiles stand in for TPOT where the per-request TPOT histogram gives nothing, on older engines)."""
    first = set(first_needs(kb))
    return [n for n in window_needs(kb) if n not in first]


def first_needs(kb: KnowledgeBase) -> list[Need]:
    """What a window is asked first: every reading but those only ``later`` alternatives name."""
    found = {n for r in _recipes(kb) for n in recipe_readings(r, deferred=False)}
    return [n for n in window_needs(kb) if n in found or n in ROOFLINE_NEEDS]


def breakdown_needs(kb: KnowledgeBase) -> list[Need]:
    """The per-label readings (a rate by a label, e.g. admission rejections by reason) whose values the evidence
    lists beside a signal; read with the first needs of a single window (a fleet reads totals only)."""
    return list(dict.fromkeys(n for r in _recipes(kb) for n in recipe_breakdowns(r)))


def info_needs(kb: KnowledgeBase) -> list[Need]:
    """The label readings (prefix caching, served model, GPU for the rooflines)."""
    return [n for n in window_needs(kb) if n.kind == "info"]


def more_needs(kb: KnowledgeBase, readings: Readings) -> list[Need]:
    """The second round of a window read so far: the ``later`` readings whose earlier alternatives gave nothing."""
    evaluator = RecipeEvaluator(kb, readings, SignalSet("server"))
    return list(dict.fromkeys(n for r in _recipes(kb) for n in evaluator.wanted_later(r)))


class RecordedSignals(SignalSet):
    """A server SignalSet in which the signals recording rules already computed (``values``, by signal) take the
    place of what the readings give: each is recorded where server_signals puts it, with ``source`` as its
    provenance (the message for that signal), whatever the readings hold (a fleet read skips the needs of recorded
    signals)."""

    def __init__(self, recorded: dict[str, float], source: Callable[[str], Msg]) -> None:
        super().__init__("server")
        self.recorded, self.recorded_source = recorded, source

    def put(self, kb: KnowledgeBase, name: str, value: float | bool | None, source: Msg) -> None:
        if name in self.recorded:
            value = self.recorded[name]
            if kb.signals[name].unit == "bool" and value == value:
                value = bool(value)
            source = self.recorded_source(name)
        super().put(kb, name, value, source)

    def complete(self, kb: KnowledgeBase) -> None:
        """Add the recorded signals server_signals had no occasion to put (a signal the tree declares)."""
        for name in self.recorded:
            if name not in self.values and name in kb.signals:
                self.put(kb, name, None, self.recorded_source(name))


def server_signals(kb: KnowledgeBase, readings: Readings, hardware: Hardware | None = None,
                   out: SignalSet | None = None) -> SignalSet:
    """Every server-side signal the window could answer; the rest stay absent (not measurable). ``out`` (e.g.
    RecordedSignals) receives them instead of a new set."""
    out = SignalSet("server") if out is None else out
    RecipeEvaluator(kb, readings, out).put_all()
    add_server_roofline(kb, out, _label(readings, "served_model").get("model_name"),
                        _label(readings, "cache_config"), _label(readings, "gpu_info", DCGM).get("modelName"),
                        hardware)
    return out


def _label(readings: Readings, key: str, engine: str = "") -> dict[str, str]:
    value = readings.get(Need("info", key, engine=engine))
    return value if isinstance(value, dict) else {}
