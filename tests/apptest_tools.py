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
    """The app run once, then switched to ``path`` with ``query`` in the URL; the page must not raise."""
    at = new_app(**query).run()
    at.switch_page(path)
    for key, value in query.items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, at.exception
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
    return "\n".join(parts)
