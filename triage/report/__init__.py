"""Renderings of a diagnosis: the --json contract, terminal text, the Markdown incident report, the retro walk."""
