"""Speed scripts that print ratios against a plain baseline in the same run (python -m bench.<name>)."""
