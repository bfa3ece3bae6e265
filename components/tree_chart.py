"""The clickable plotly decision tree: highlight the matched branch, select a node on click."""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache, partial
from pathlib import Path

import plotly.graph_objects as go
import streamlit as st

from components import session
from components.chart_style import dark as dark_theme
from components.chart_style import template
from components.shell import knowledge, lang
from triage.service.knowledge import PlacedNode, highlight_keys, layout, selected_keys, wrap_label

CHART_KEY = session.TREE_CHART.name
NODE_PARAM = "node"
LEVEL_COLORS = {"root": "#37474F", "symptom": "#1565C0", "cause": "#EF6C00", "technique": "#2E7D32"}
# dark theme: the root's dark grey was near invisible on the black page; a light blue-grey stays distinct
LEVEL_COLORS_DARK = {**LEVEL_COLORS, "root": "#B0BEC5"}
LIT_EDGE, DIM_EDGE = "#D32F2F", "#B0BEC5"
# (ink, faded, selection ring) per theme: faded labels off the lit branch still reach WCAG AA (4.5:1) on
# Streamlit's page background, so a dimmed branch stays readable in an incident.
LABEL_INK = {False: ("#111111", "#6E6E6E", "#000000"), True: ("#EEEEEE", "#949494", "#FFFFFF")}
PAGE_BACKGROUND = {False: "#FFFFFF", True: "#0E1117"}
ROW_PX = 33  # a two-line label at 11 px (29 px tall) fits in one row, with air to the next
ELBOW = 0.12
# Label width in cells per column: the full tree (Diagnose, 3/5 of the page) and the half-width one
# (Benchmark, Live) both stay legible at a 1024 px window; longer labels wrap to two lines, then "…".
LABEL_CELLS = {False: {"root": 10, "symptom": 12, "cause": 16, "technique": 15},
               True: {"root": 9, "symptom": 10, "cause": 14, "technique": 12}}


def _edges(nodes: list[PlacedNode], keys: set[str] | None) -> tuple[list, list]:
    by_key = {n.key: n for n in nodes}
    xs: list = []
    ys: list = []
    for n in nodes:
        if n.parent_key is None or (keys is not None and n.key not in keys):
            continue
        p = by_key[n.parent_key]
        xm = n.x - ELBOW  # the bend sits just before the child, so the parent's label above the line stays clear
        xs += [p.x, xm, xm, n.x, None]
        ys += [p.y, p.y, n.y, n.y, None]
    return xs, ys


def build_figure(nodes: list[PlacedNode], lit: set[str], chosen: set[str], compact: bool = False,
                 dark: bool = False, judged: bool = False) -> go.Figure:
    """Three traces: grey edges, red edges of the lit branch, then the nodes (curve 2).

    ``compact`` wraps labels narrower (the half-width tree); ``dark`` picks text colours for a dark theme;
    ``judged`` is a tree beside a diagnosis, faded even when nothing is lit (at full colour, a healthy run's
    tree read as if every branch matched)."""
    fig = go.Figure()
    dim_x, dim_y = _edges(nodes, None)
    lit_x, lit_y = _edges(nodes, lit)
    fig.add_trace(go.Scatter(x=dim_x, y=dim_y, mode="lines", hoverinfo="skip",
                             line=dict(color=DIM_EDGE, width=1.2), showlegend=False))
    fig.add_trace(go.Scatter(x=lit_x, y=lit_y, mode="lines", hoverinfo="skip",
                             line=dict(color=LIT_EDGE, width=4), showlegend=False))
    dim = bool(lit) or judged
    opacity = [1.0 if (not dim or n.key in lit or n.key in chosen) else 0.35 for n in nodes]
    cells = LABEL_CELLS[compact]
    ink, faded, ring = LABEL_INK[dark]
    fig.add_trace(go.Scatter(
        x=[n.x for n in nodes], y=[n.y for n in nodes], mode="markers+text",
        text=[wrap_label(n.label, cells[n.kind]) for n in nodes],
        hovertext=[n.label for n in nodes],
        textposition=["middle right" if n.kind == "technique" else "top right" for n in nodes],
        customdata=[n.id for n in nodes],
        hovertemplate="%{hovertext}<extra>%{customdata}</extra>", showlegend=False,
        textfont=dict(size=11, color=[ink if o == 1.0 else faded for o in opacity]),
        marker=dict(size=[20 if n.key in chosen else 12 for n in nodes],
                    color=[(LEVEL_COLORS_DARK if dark else LEVEL_COLORS)[n.kind] for n in nodes], opacity=opacity,
                    line=dict(width=[3 if n.key in chosen else 0.5 for n in nodes],
                              color=[ring if n.key in chosen else "#FFF" for n in nodes])),
        selected=dict(marker=dict(opacity=1)),
        unselected=dict(marker=dict(opacity=1)),
    ))
    rows = max(1, int(-min(n.y for n in nodes)) + 1)
    fig.update_layout(height=rows * ROW_PX + 50, dragmode=False, clickmode="event+select",
                      margin=dict(l=5, r=5, t=20, b=10), template=template(dark),
                      xaxis=dict(visible=False, fixedrange=True, range=[-0.05, 4.6]),
                      yaxis=dict(visible=False, fixedrange=True))
    return fig


def node_from_selection(event: object) -> str | None:
    """The node id in a plotly selection event, or None for an empty (deselect) event."""
    if not isinstance(event, dict):
        return None
    for point in (event.get("selection") or {}).get("points", []):
        data = point.get("customdata")
        data = data[0] if isinstance(data, list) and data else data
        if isinstance(data, str) and data:
            return data
    return None


def _on_select(scroll: bool = False) -> None:
    clicked = node_from_selection(session.TREE_CHART.value())
    if clicked and knowledge().has(clicked):
        st.query_params[NODE_PARAM] = clicked
        if scroll:  # beside findings the node's panel opens above the tree: bring it into view
            session.TREE_SCROLL.set(clicked)


def selected_node() -> str | None:
    """The node named by ``?node=`` if the tree has it (the URL is the single source of truth)."""
    wanted = st.query_params.get(NODE_PARAM)
    return wanted if wanted and knowledge().has(wanted) else None


def request_scroll(node_id: str) -> None:
    """Select ``node_id`` and have the next draw of the tree scroll it into view (a button's on_click)."""
    st.query_params[NODE_PARAM] = node_id
    session.TREE_SCROLL.set(node_id)


# Runs in a zero-height component iframe (same origin): waits for the redrawn tree with the node ringed,
# then scrolls the page's scroll container so the node sits mid-screen.
_SCROLL_JS = """<script>
const want = %s, doc = window.parent.document;
function go(n) {
  const gd = doc.querySelector('.st-key-%s .js-plotly-plot');
  const tr = gd && gd._fullLayout && gd.data && gd.data[2];
  const i = tr ? Array.from(tr.customdata || []).indexOf(want) : -1;
  const ready = i >= 0 && Array.isArray(tr.marker.size) && tr.marker.size[i] > 12;
  if (!ready) { if (n < 600) setTimeout(() => go(n + 1), 100); return; }
  const r = gd.getBoundingClientRect(), fl = gd._fullLayout;
  const y = r.top + fl._size.t + fl.yaxis.l2p(tr.y[i]);
  let el = gd.parentElement;
  while (el && !(el.scrollHeight > el.clientHeight && /(auto|scroll)/.test(getComputedStyle(el).overflowY)))
    el = el.parentElement;
  const top = el ? el.getBoundingClientRect().top : 0, h = el ? el.clientHeight : window.parent.innerHeight;
  (el || doc.scrollingElement).scrollBy({top: y - top - h / 2, behavior: "instant"});
}
go(0);
</script>"""

# The same, for a tree whose selected node's panel is drawn above it (Live, Benchmark): once the panel names
# the node, scroll the panel's top into view. A busy browser can take long to draw the rerun: waits up to 60 s.
_PANEL_JS = """<script>
const want = %s, doc = window.parent.document;
function go(n) {
  const panel = doc.querySelector('.st-key-%s');
  if (!panel || !panel.innerText.includes(want)) { if (n < 600) setTimeout(() => go(n + 1), 100); return; }
  panel.scrollIntoView({block: "start", behavior: "instant"});
}
go(0);
</script>"""


def _scroll_into_view(panel: str | None = None) -> None:
    node = session.TREE_SCROLL.pop()
    if node:
        import json

        from streamlit.components.v1 import html

        if panel:
            html(_PANEL_JS % (json.dumps(node), panel), height=0)
        else:
            html(_SCROLL_JS % (json.dumps(node), CHART_KEY), height=0)


@lru_cache(maxsize=8)
def _nodes(language: str, tree_dir: Path) -> tuple[PlacedNode, ...]:
    """The placed nodes of the active tree, whose directory is ``tree_dir``: the key keeps another tree's apart."""
    return tuple(layout(knowledge(), language))


@lru_cache(maxsize=256)
def _figure(language: str, tree_dir: Path, highlight: frozenset[str], selected: str | None, compact: bool,
            dark: bool, judged: bool) -> go.Figure:
    """One figure per look and tree, built once per process: plotly's validation of ~200 styled points is the
    slowest part of drawing the tree. Streamlit copies the figure (to_dict) before sending it."""
    nodes = list(_nodes(language, tree_dir))
    return build_figure(nodes, highlight_keys(nodes, set(highlight)), selected_keys(nodes, selected),
                        compact=compact, dark=dark, judged=judged)


def tree_chart(highlight: Iterable[str] = (), compact: bool = False, judged: bool = False,
               panel: str | None = None) -> None:
    """Draw the tree with ``highlight`` ids lit and the ``?node=`` selection ringed.

    ``compact`` is the half-width tree beside findings (narrower labels); ``judged`` fades it when the
    diagnosis beside it lit nothing; ``panel`` is the key of the container above the tree that shows the
    selected node's panel: a click or a "Show in the tree" scrolls to it rather than to the node."""
    fig = _figure(lang(), knowledge().source_dir, frozenset(highlight), selected_node(), compact, dark_theme(),
                  judged)
    st.plotly_chart(fig, key=CHART_KEY, on_select=partial(_on_select, scroll=panel is not None),
                    selection_mode="points", theme=None, config={"displayModeBar": False, "scrollZoom": False},
                    width="stretch")
    _scroll_into_view(panel)
