"""Verify a change against its baseline: bootstrap comparison, the regression gate, the experiment log."""
