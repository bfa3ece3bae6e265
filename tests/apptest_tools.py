"""AppTest helpers: one place that touches AppTest internals to inject a plotly click."""

from __future__ import annotations

import json
from pathlib import Path

from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parent.parent / "app.py")


def new_app(**query: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=30)
    for key, value in query.items():
        at.query_params[key] = value
    return at


def open_page(path: str, **query: str) -> AppTest:
    """``path`` opened as a link to it opens it: the app's first run is that page, with ``query`` in the URL (the
    app script, which every page runs under, runs first as always); the page must not raise, and must be the
    page that ran (before a first run AppTest finds a page by its file name, as app.py registers every page)."""
    at = new_app(**query)
    at.switch_page(path)
    at.run()
    assert not at.exception, at.exception
    ran = at._registered_pages.get(at._finished_page_script_hash, {}).get("script_path")
    assert ran and Path(str(ran)).resolve() == (Path(APP).parent / path).resolve(), f"{path} asked, {ran} ran"
    return at


def click_plotly(at: AppTest, key: str, customdata: str, curve: int = 2, index: int = 0) -> AppTest:
    """Send the selection event a real click on a point sends; the on_select callback runs."""
    chart = next(c for c in at.get("plotly_chart") if c.key == key)
    point = {"curve_number": curve, "point_number": index, "point_index": index, "customdata": customdata}
    payload = {"selection": {"points": [point], "point_indices": [index], "box": [], "lasso": []}}
    states = at._tree.get_widget_states()
    widget = states.widgets.add()
    widget.id = chart.proto.id
    widget.string_value = json.dumps(payload)
    return at._run(states)


def texts(at: AppTest) -> str:
    """All visible markdown, captions, titles and headers of the last run, joined."""
    parts = []
    for kind in ("markdown", "caption", "title", "header", "subheader", "info", "warning", "error", "success"):
        parts += [str(e.value) for e in at.get(kind)]
    parts += [" | ".join(cell for row in _table_rows(body) for cell in row) for body in _html_bodies(at)]
    return "\n".join(parts)


def _html_bodies(at: AppTest) -> list[str]:
    return [str(el.proto.body) for el in at.get("html")]


def _table_rows(body: str) -> list[list[str]]:
    """The rows of the HTML tables in ``body`` (components/static_table.py), each cell's text unescaped."""
    from html.parser import HTMLParser

    class Rows(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.rows: list[list[str]] = []
            self.cell: list[str] | None = None

        def handle_starttag(self, tag: str, attrs: list) -> None:
            if tag == "tr":
                self.rows.append([])
            elif tag in ("td", "th"):
                self.cell = []

        def handle_endtag(self, tag: str) -> None:
            if tag in ("td", "th") and self.cell is not None:
                self.rows[-1].append("".join(self.cell))
                self.cell = None

        def handle_data(self, data: str) -> None:
            if self.cell is not None:
                self.cell.append(data)

    parser = Rows()
    parser.feed(body)
    return parser.rows


def static_tables(at: AppTest) -> list:
    """The static tables (components/static_table.py) on the page, read back as DataFrames indexed by their
    first column, every cell unescaped."""
    import pandas as pd

    from components.static_table import CLASS

    tables = []
    for body in _html_bodies(at):
        if f'class="{CLASS}"' not in body:
            continue
        head, *rows = _table_rows(body)
        df = pd.DataFrame([r[1:] for r in rows], columns=head[1:], index=[r[0] for r in rows])
        df.index.name = head[0] or None
        tables.append(df)
    return tables
