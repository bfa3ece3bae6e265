"""Markers that need no emoji font, a tree root that reads on a dark page, TTFT and TPOT in two colours."""

from __future__ import annotations

import json
import re

from components.tree_chart import LABEL_INK, PAGE_BACKGROUND, build_figure
from tests.test_benchmark_page import bench_page
from triage.knowledge.layout import layout
from triage.knowledge.loader import load_knowledge

EMOJI = re.compile("[\U0001F300-\U0001FAFF\u2753\u2754\u26AA\u26AB]")  # 🟢 🔴 ❔ ⚪ … need an emoji font


def _luminance(hex_colour: str) -> float:
    channels = [int(hex_colour.lstrip("#")[i:i + 2], 16) / 255 for i in (0, 2, 4)]
    lin = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def _contrast(a: str, b: str) -> float:
    hi, lo = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def test_symptom_markers_are_material_icons_not_emoji():
    """The bundled sample has a present symptom, absent ones and unmeasurable ones: each line starts with a
    Material icon (Streamlit's own font), none with an emoji that renders as an empty box without a font."""
    at = bench_page()
    lines = [line for m in at.markdown for line in str(m.value).split("\n\n")
             if "— " in line and ("not measurable" in line or "present" in line or "no symptom" in line)]
    assert lines, "no symptom line"
    assert all(line.startswith((":red[:material/", ":green[:material/", ":gray[:material/")) for line in lines)
    assert not [line for line in lines if EMOJI.search(line)]
    assert {line.split("]")[0] for line in lines} >= {":red[:material/error:", ":gray[:material/help:"}


def test_tree_root_reads_on_the_dark_page():
    """The root marker was #37474F on #0E1117 (1.9:1); in the dark theme it now has at least 3:1 (WCAG non-text
    contrast), as every other level's marker has on both themes."""
    kb = load_knowledge()
    nodes = layout(kb, "en")
    for dark in (False, True):
        fig = build_figure(nodes, set(), set(), dark=dark)
        colours = dict(zip([n.kind for n in nodes], fig.data[2].marker.color, strict=True))
        assert _contrast(colours["root"], PAGE_BACKGROUND[dark]) >= 3.0, (dark, colours["root"])
        assert LABEL_INK[dark]


def test_ttft_and_tpot_have_their_own_colours():
    """Over the run and in the distributions, TTFT and TPOT were both plotly's first blue."""
    at = bench_page()
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    bars = {s["data"][0]["name"]: s["data"][0]["marker"]["color"] for s in specs
            if s["data"] and s["data"][0].get("type") == "bar"}
    assert set(bars) == {"ttft_s", "tpot_s"} and bars["ttft_s"] != bars["tpot_s"]
    at.session_state["bench_tab"] = next(tab.label for tab in at.tabs if tab.label == "Latency over the run")
    at.run()
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    spec = next(s for s in specs if {d.get("name") for d in s["data"]} == {"TTFT", "TPOT"})
    colours = {d["name"]: d["marker"]["color"] for d in spec["data"]}
    assert colours["TTFT"] != colours["TPOT"]
    assert (bars["ttft_s"], bars["tpot_s"]) == (colours["TTFT"], colours["TPOT"])  # the same on every chart


def test_no_page_writes_an_emoji_marker():
    """Verify's verdict column carried 🟢 / 🔴 / ⚪ after the symptom lines lost theirs: no component, page or UI
    string may draw a character that needs an emoji font."""
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    files = [*root.glob("components/*.py"), *root.glob("pages/*.py"), root / "app.py", root / "tree" / "ui.yaml"]
    found = [f"{f.relative_to(root)}:{n}" for f in files
             for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1)
             if EMOJI.search(line) and "emoji" not in line]
    assert not found, found
