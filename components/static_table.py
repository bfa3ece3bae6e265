"""A small read-only table drawn as sanitized HTML: long text wraps, and the browser needs neither grid nor
Arrow code (st.table ships each table as Arrow and loads about 0.9 MB of JavaScript to read it) nor the
Markdown parser (a GFM table is parsed cell by cell into React elements; on the Live page the evidence
tables were the largest part of the browser's work before its first chart)."""

from __future__ import annotations

from html import escape

import pandas as pd
import streamlit as st

CLASS = "triage-table"
# Like Streamlit's Markdown tables (content width, cell borders), in the theme's colour and font, light or
# dark. Words break where a reader would: at spaces, and after the underscores and slashes of a signal name
# or a formula (<wbr>); only a word still wider than its column breaks inside, so the table never needs a
# sideways scroll, even in half of a 1024 px window. A column header breaks only between words ("Change" never
# reads "Chang|e"): its longest word sets the column's least width, so a short value ("no") stays whole too.
_STYLE = (f"<style>.{CLASS}-wrap{{overflow-x:auto;margin:0 0 1rem}}"
          f".{CLASS}{{border-collapse:collapse;font-size:0.875rem}}"
          f".{CLASS} th,.{CLASS} td{{border:1px solid rgba(128,128,128,0.3);padding:0.25rem 0.5rem;"
          f"text-align:left;vertical-align:top;overflow-wrap:anywhere}}"
          f".{CLASS} th[scope=col]{{font-weight:600;overflow-wrap:break-word}}"
          f".{CLASS} th[scope=row]{{font-weight:400;overflow-wrap:break-word}}"
          f".{CLASS}-words td{{overflow-wrap:break-word}}</style>")


def html_table(df: pd.DataFrame, whole_words: bool = False) -> str:
    """``df`` as an HTML table, its index as the first column (a row header); every cell escaped. With
    ``whole_words`` a cell breaks only between words and after hyphens ("--max-|model-len", never
    "--quantizatio|n"): for a full-width table whose columns can afford their longest word."""
    head = [df.index.name or "", *map(str, df.columns)]
    rows = ["<tr>" + "".join(f'<th scope="col">{escape(h)}</th>' for h in head) + "</tr>"]
    for index, row in zip(df.index, df.itertuples(index=False)):
        rows.append(f'<tr><th scope="row">{_breakable(index)}</th>'
                    + "".join(f"<td>{_breakable(v)}</td>" for v in row) + "</tr>")
    wrap = f"{CLASS}-wrap {CLASS}-words" if whole_words else f"{CLASS}-wrap"
    return f'{_STYLE}<div class="{wrap}"><table class="{CLASS}"><tbody>{"".join(rows)}</tbody></table></div>'


def _breakable(value: object) -> str:
    """The cell's text escaped, with a line-break opportunity after each underscore and slash; a newline in the
    text starts a new line."""
    return escape(str(value)).replace("_", "_<wbr>").replace("/", "/<wbr>").replace("\n", "<br>")


def static_table(df: pd.DataFrame, whole_words: bool = False) -> None:
    """Draw ``df`` (indexed by its first column) as a static, wrapping table (see html_table)."""
    st.html(html_table(df, whole_words))
