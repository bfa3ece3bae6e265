"""Inference Triage core: knowledge, signals, rules and sources; never imports streamlit."""
