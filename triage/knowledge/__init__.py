"""The knowledge base in tree/: typed model, loader and validator, engine maps, panels, strings, tree layout; what a
window is asked (needs), how PromQL names replicas (replicas), model and GPU specs (specs)."""

from pathlib import Path

DEFAULT_TREE_DIR = Path(__file__).resolve().parents[2] / "tree"  # the repository's knowledge base
