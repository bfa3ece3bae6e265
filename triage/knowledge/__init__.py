"""The knowledge base in tree/: typed model, loader and validator, engine maps, panels, strings, tree layout."""
