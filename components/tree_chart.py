"""The clickable plotly decision tree: highlight the matched branch, select a node on click."""

from __future__ import annotations

from collections.abc import Iterable

import plotly.graph_objects as go
import streamlit as st

from components.shell import knowledge, lang
from triage.knowledge.layout import PlacedNode, highlight_keys, layout, selected_keys

CHART_KEY = "tree"
NODE_PARAM = "node"
LEVEL_COLORS = {"root": "#37474F", "symptom": "#1565C0", "cause": "#EF6C00", "technique": "#2E7D32"}
LIT_EDGE, DIM_EDGE = "#D32F2F", "#B0BEC5"
ROW_PX = 24
ELBOW = 0.12


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


def build_figure(nodes: list[PlacedNode], lit: set[str], chosen: set[str]) -> go.Figure:
    """Three traces: grey edges, red edges of the lit branch, then the nodes (curve 2)."""
    fig = go.Figure()
    dim_x, dim_y = _edges(nodes, None)
    lit_x, lit_y = _edges(nodes, lit)
    fig.add_trace(go.Scatter(x=dim_x, y=dim_y, mode="lines", hoverinfo="skip",
                             line=dict(color=DIM_EDGE, width=1.2), showlegend=False))
    fig.add_trace(go.Scatter(x=lit_x, y=lit_y, mode="lines", hoverinfo="skip",
                             line=dict(color=LIT_EDGE, width=4), showlegend=False))
    dim = bool(lit)
    opacity = [1.0 if (not dim or n.key in lit or n.key in chosen) else 0.35 for n in nodes]
    fig.add_trace(go.Scatter(
        x=[n.x for n in nodes], y=[n.y for n in nodes], mode="markers+text",
        text=[n.label for n in nodes],
        textposition=["middle right" if n.kind == "technique" else "top right" for n in nodes],
        customdata=[n.id for n in nodes],
        hovertemplate="%{text}<extra>%{customdata}</extra>", showlegend=False,
        textfont=dict(size=12, color=["#111" if o == 1.0 else "#9E9E9E" for o in opacity]),
        marker=dict(size=[20 if n.key in chosen else 12 for n in nodes],
                    color=[LEVEL_COLORS[n.kind] for n in nodes], opacity=opacity,
                    line=dict(width=[3 if n.key in chosen else 0.5 for n in nodes],
                              color=["#000" if n.key in chosen else "#FFF" for n in nodes])),
        selected=dict(marker=dict(opacity=1)),
        unselected=dict(marker=dict(opacity=1)),
    ))
    rows = max(1, int(-min(n.y for n in nodes)) + 1)
    fig.update_layout(height=rows * ROW_PX + 40, dragmode=False, clickmode="event+select",
                      margin=dict(l=5, r=5, t=10, b=10), plot_bgcolor="rgba(0,0,0,0)",
                      xaxis=dict(visible=False, fixedrange=True, range=[-0.05, 4.45]),
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


def _on_select() -> None:
    clicked = node_from_selection(st.session_state.get(CHART_KEY))
    if clicked and knowledge().has(clicked):
        st.query_params[NODE_PARAM] = clicked


def selected_node() -> str | None:
    """The node named by ``?node=`` if the tree has it (the URL is the single source of truth)."""
    wanted = st.query_params.get(NODE_PARAM)
    return wanted if wanted and knowledge().has(wanted) else None


def tree_chart(highlight: Iterable[str] = ()) -> None:
    """Draw the tree with ``highlight`` ids lit and the ``?node=`` selection ringed."""
    nodes = layout(knowledge(), lang())
    fig = build_figure(nodes, highlight_keys(nodes, set(highlight)), selected_keys(nodes, selected_node()))
    st.plotly_chart(fig, key=CHART_KEY, on_select=_on_select, selection_mode="points",
                    config={"displayModeBar": False, "scrollZoom": False}, width="stretch")
