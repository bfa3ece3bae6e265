"""The UI's read-only view of the knowledge in tree/: the loaded tree, UI strings and languages, SLO presets,
techniques and their knobs, engines' metrics, the Live panels, provenance and the tree chart's layout."""

from __future__ import annotations

from triage.diagnosis.rules import resolve_slo
from triage.knowledge.engines import load_engines
from triage.knowledge.i18n import default_text, flag_text, tr
from triage.knowledge.knobs import paper_url, tool_label, versions_line
from triage.knowledge.layout import PlacedNode, highlight_keys, layout, selected_keys, wrap_label
from triage.knowledge.loader import ROOT_ID, KnowledgeBase, active_tree_dir, load_knowledge
from triage.knowledge.messages import message_text
from triage.knowledge.model import LANGS, LEVEL_ORDER, PublishedGain, Technique, Text
from triage.knowledge.panels import Panel, line_points

__all__ = ["LANGS", "LEVEL_ORDER", "ROOT_ID", "active_tree_dir", "default_text", "flag_text", "highlight_keys",
           "KnowledgeBase", "layout", "line_points", "load_engines", "load_knowledge", "message_text", "Panel",
           "paper_url", "PlacedNode", "PublishedGain", "resolve_slo", "selected_keys", "Technique", "Text",
           "tool_label", "tr", "versions_line", "wrap_label"]
