"""Pure pieces of the tree picture: layout, highlight path, click mapping, sweep knee."""

from __future__ import annotations

from components.tree_chart import build_figure, node_from_selection
from triage.diagnosis.sweep import knee_index
from triage.knowledge.layout import COLUMN_X, highlight_keys, layout, selected_keys


def test_layout_places_every_node_once_per_drawing(kb):
    nodes = layout(kb)
    keys = [n.key for n in nodes]
    assert len(keys) == len(set(keys))
    assert {n.kind for n in nodes} == {"root", "symptom", "cause", "technique"}
    leaves = [n for n in nodes if n.kind == "technique"]
    assert len(leaves) == sum(len(c.techniques) for c in kb.causes.values())
    assert all(n.x == COLUMN_X[n.kind] for n in nodes)


def test_parents_sit_between_their_children(kb):
    nodes = layout(kb)
    by_key = {n.key: n for n in nodes}
    for cause in (n for n in nodes if n.kind == "cause"):
        ys = [n.y for n in nodes if n.parent_key == cause.key]
        assert min(ys) <= cause.y <= max(ys)
    assert by_key["root"].parent_key is None


def test_highlight_lights_the_path_and_the_causes_techniques(kb):
    nodes = layout(kb)
    lit = highlight_keys(nodes, {"ttft.queueing"})
    assert {"root", "ttft", "ttft.queueing", "ttft.queueing/continuous_batching"} <= lit
    assert "tpot" not in lit and "ttft.repeated_prefill" not in lit
    assert highlight_keys(nodes, set()) == set()


def test_selection_rings_every_drawing_of_a_technique(kb):
    nodes = layout(kb)
    rings = selected_keys(nodes, "pd_disaggregation")
    assert len(rings) == len(kb.causes_reaching("pd_disaggregation")) > 1


def test_figure_dims_what_is_not_lit(kb):
    nodes = layout(kb)
    fig = build_figure(nodes, highlight_keys(nodes, {"memory.kv_cache"}), set())
    markers = fig.data[2].marker
    assert min(markers.opacity) < 1 and max(markers.opacity) == 1
    assert len(fig.data[1].x) > 0  # the red edges exist


def test_a_tree_beside_a_diagnosis_that_lit_nothing_is_faded_not_full_colour(kb):
    """A healthy run lights nothing: beside its diagnosis the tree fades every node (at full colour it read as
    if every branch matched); the browsing tree with nothing lit stays at full colour."""
    nodes = layout(kb)
    judged = build_figure(nodes, set(), set(), compact=True, judged=True).data[2].marker.opacity
    browsing = build_figure(nodes, set(), set(), compact=True).data[2].marker.opacity
    assert max(judged) < 1 and min(browsing) == 1


def test_click_event_mapping():
    event = {"selection": {"points": [{"customdata": "ttft.queueing", "curve_number": 2}]}}
    assert node_from_selection(event) == "ttft.queueing"
    assert node_from_selection({"selection": {"points": [{"customdata": ["memory"]}]}}) == "memory"
    assert node_from_selection({"selection": {"points": []}}) is None
    assert node_from_selection(None) is None


def test_labels_follow_the_language(kb):
    zh = {n.key: n.label for n in layout(kb, "zh")}
    assert zh["ttft"] == "TTFT 过高" and zh["ttft.queueing"] == "排队太久"


def test_knee_of_a_latency_curve():
    x = [1, 2, 3, 4, 5, 6]
    y = [0.1, 0.11, 0.12, 0.14, 0.6, 2.0]
    assert knee_index(x, y) == 3
    assert knee_index([1, 2], [1, 2]) is None


def test_labels_wrap_to_two_lines_then_ellipsis():
    from triage.knowledge.layout import wrap_label

    assert wrap_label("Continuous batching", 12) == "Continuous<br>batching"
    assert wrap_label("Requests queue too long behind others", 14) == "Requests queue<br>too long…"
    assert all(len(line) <= 7 for line in wrap_label("排队太久导致首字延迟很高", 14).split("<br>"))
    assert wrap_label("Short", 12) == "Short"
    assert wrap_label("FlashAttn/FlashInfer", 12) == "FlashAttn/<br>FlashInfer"  # at the slash, not mid-word
    assert wrap_label("TP/PP/EP/DP", 12) == "TP/PP/EP/DP"
    assert wrap_label("GEMM / CUDA graphs", 12) == "GEMM / CUDA<br>graphs"  # a lone slash keeps its spaces
    assert wrap_label("PagedAttention", 12) == "Paged<br>Attention"  # at the case change, no hyphen
    assert wrap_label("PD disaggregation", 12) == "PD disaggre-<br>gation"  # two lines, not "PD disaggregat…"
    assert wrap_label("Prefix-aware routing", 12) == "Prefix-aware<br>routing"  # after its own hyphen


def test_compact_tree_wraps_every_label_within_its_column(kb):
    from components.tree_chart import LABEL_CELLS
    from triage.knowledge.layout import _width

    for lang in ("en", "zh"):
        nodes = layout(kb, lang)
        fig = build_figure(nodes, set(), set(), compact=True)
        for node, text in zip(nodes, fig.data[2].text):
            lines = text.split("<br>")
            assert len(lines) <= 2 and all(_width(x) <= LABEL_CELLS[True][node.kind] for x in lines), text
        assert list(fig.data[2].hovertext) == [n.label for n in nodes]  # the full label on hover


def test_adjacent_cause_labels_have_room_for_two_lines(kb):
    # a cause label (up to two lines of 11 px, drawn above its marker) needs more than one row;
    # two single-technique causes in a row once drew "Poor multi-GPU scaling" over "Many long sequences"
    for lang in ("en", "zh"):
        ys = sorted((n.y for n in layout(kb, lang) if n.kind == "cause"), reverse=True)
        gaps = [upper - lower for upper, lower in zip(ys, ys[1:])]
        assert min(gaps) >= 1.3, min(gaps)


def _luminance(hex_color: str) -> float:
    def channel(c: int) -> float:
        v = c / 255
        return v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4
    r, g, b = (int(hex_color[i:i + 2], 16) for i in (1, 3, 5))
    return 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b)


def test_dimmed_labels_stay_readable_in_light_and_dark(kb):
    """Labels off the lit branch keep WCAG AA contrast (4.5:1) on the page background in both themes."""
    from components.tree_chart import PAGE_BACKGROUND

    nodes = layout(kb)
    lit = highlight_keys(nodes, {"ttft.queueing"})
    for dark in (False, True):
        colors = build_figure(nodes, lit, set(), dark=dark).data[2].textfont.color
        bg = _luminance(PAGE_BACKGROUND[dark])
        for color in set(colors):
            hi, lo = sorted((_luminance(color), bg), reverse=True)
            assert (hi + 0.05) / (lo + 0.05) >= 4.5, (dark, color)
        assert len(set(colors)) == 2  # the lit branch still stands out from the rest
