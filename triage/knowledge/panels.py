"""Live panel definitions (tree/panels.yaml) and the point-by-point values they draw."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, model_validator

from triage.knowledge.model import Strict, Text
from triage.knowledge.needs import Need, NeedKind, SeriesPoint


class NeedSpec(Strict):
    kind: NeedKind
    key: str
    q: float | None = None

    def need(self) -> Need:
        return Need(self.kind, self.key, self.q)


class Ratio(Strict):
    num: NeedSpec
    den: NeedSpec


class Line(Strict):
    label: str
    need: NeedSpec | None = None
    ratio: Ratio | None = None
    scale: float = 1.0

    @model_validator(mode="after")
    def _one_source(self) -> Line:
        if (self.need is None) == (self.ratio is None):
            raise ValueError("give exactly one of 'need' or 'ratio'")
        return self

    def needs(self) -> list[Need]:
        if self.need is not None:
            return [self.need.need()]
        assert self.ratio is not None  # exactly one of the two (validated above)
        return [self.ratio.num.need(), self.ratio.den.need()]


class Panel(Strict):
    id: str
    title: Text
    unit: str
    group: str  # a PanelGroup id: the Live page shows one group (tab) at a time
    lines: list[Line] = Field(min_length=1)

    def needs(self) -> list[Need]:
        return [n for line in self.lines for n in line.needs()]


class PanelGroup(Strict):
    """One tab of Live panels; its title is the interface string ``live_group_<id>`` (tree/ui.yaml).

    ``symptoms`` decide which tab opens when the lit finding's evidence is drawn by no panel (or equally by two).
    """

    id: str
    symptoms: list[str] = Field(default_factory=list)

    @property
    def title_key(self) -> str:
        return f"live_group_{self.id}"


def load_panels(tree_dir: Path | None = None) -> tuple[Panel, ...]:
    """The live panels of tree/panels.yaml (validated with the rest of the tree)."""
    from triage.knowledge.loader import load_knowledge  # the loader imports this module's schema

    return load_knowledge(tree_dir).panels


def load_panel_groups(tree_dir: Path | None = None) -> tuple[PanelGroup, ...]:
    """The Live panel groups (tabs) of tree/panels.yaml, in tab order."""
    from triage.knowledge.loader import load_knowledge

    return load_knowledge(tree_dir).panel_groups


def line_points(line: Line, series: dict[Need, list[SeriesPoint]]) -> list[SeriesPoint]:
    """The line's points, scaled; a ratio divides matching timestamps and skips zero denominators."""
    if line.need is not None:
        return [SeriesPoint(p.t, p.value * line.scale) for p in series.get(line.need.need(), [])]
    assert line.ratio is not None  # exactly one of need and ratio (validated)
    den = {p.t: p.value for p in series.get(line.ratio.den.need(), [])}
    return [SeriesPoint(p.t, p.value / den[p.t] * line.scale)
            for p in series.get(line.ratio.num.need(), []) if den.get(p.t)]
