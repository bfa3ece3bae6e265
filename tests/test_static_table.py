"""The static table is escaped HTML: a cell's text can never become markup, and it reads back cell for cell."""

from __future__ import annotations

import pandas as pd

from components.static_table import html_table
from tests.apptest_tools import _table_rows


def test_cells_are_escaped_and_read_back():
    df = pd.DataFrame({"Meaning": ['<img src=x onerror="alert(1)">', "a | b & c"]},
                      index=pd.Index(["<script>x</script>", "ttft_p99_s"], name="Signal"))
    body = html_table(df)
    assert "<script>x" not in body and "<img" not in body and "&lt;img src=x" in body
    assert _table_rows(body) == [["Signal", "Meaning"], ["<script>x</script>", '<img src=x onerror="alert(1)">'],
                                 ["ttft_p99_s", "a | b & c"]]
