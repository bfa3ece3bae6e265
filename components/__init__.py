"""Reusable Streamlit pieces: they arrange what triage/ computes and hold no domain logic."""
