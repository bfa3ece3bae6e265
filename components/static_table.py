"""A small read-only table drawn as Markdown: long text wraps, and the browser needs no grid or Arrow code
for it (st.table ships each table as Arrow and loads about 0.9 MB of JavaScript to read it before the
page's first chart is drawn)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from triage.safe_text import md_escape


def _cell(value: object) -> str:
    return md_escape(value) if str(value) else " "


def markdown_table(df: pd.DataFrame) -> str:
    """``df`` as a GitHub-flavoured Markdown table, its index as the first column; every cell escaped."""
    head = [df.index.name or "", *map(str, df.columns)]
    lines = ["| " + " | ".join(_cell(h) for h in head) + " |", "|" + " --- |" * len(head)]
    for index, row in zip(df.index, df.itertuples(index=False)):
        lines.append("| " + " | ".join(_cell(v) for v in (index, *row)) + " |")
    return "\n".join(lines)


def static_table(df: pd.DataFrame) -> None:
    """Draw ``df`` (indexed by its first column) as a static, wrapping table."""
    st.markdown(markdown_table(df))
