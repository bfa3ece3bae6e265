"""The server settings in .streamlit/config.toml are ones Streamlit knows, with the values the app relies on."""

from __future__ import annotations

import tomllib
from pathlib import Path

from streamlit import config

CONFIG = Path(__file__).resolve().parent.parent / ".streamlit" / "config.toml"


def _settings() -> dict[str, object]:
    """Every ``section.option`` set in the file, as Streamlit names it (theme sub-sections flattened)."""
    out: dict[str, object] = {}

    def walk(prefix: str, table: dict) -> None:
        for key, value in table.items():
            if isinstance(value, dict):
                walk(f"{prefix}{key}.", value)
            else:
                out[f"{prefix}{key}"] = value

    walk("", tomllib.loads(CONFIG.read_text()))
    return out


def test_every_setting_is_an_option_streamlit_knows():
    known = set(config._config_options_template)  # a misspelt option would be ignored with only a log line
    unknown = [name for name in _settings() if name not in known]
    assert unknown == []


def test_no_full_garbage_collection_after_each_run():
    # A full collection walks the whole heap with the GIL held after every run (every Live refresh, every
    # click): the server stops sending the run's elements and serving the chart code meanwhile.
    assert _settings()["runner.postScriptGC"] is False


def test_no_file_watching_and_no_rerun_on_save():
    settings = _settings()
    assert settings["server.fileWatcherType"] == "none" and settings["server.runOnSave"] is False
