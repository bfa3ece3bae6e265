"""Diagnosis: signals from a run or a metric window, the rule evaluator, findings ordered root cause first."""
