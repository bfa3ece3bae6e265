"""Layout pieces the app's charts share, so a legend sits in the same place on every page."""

from __future__ import annotations

# Anchored by its bottom just above the plot area: when the legend wraps (several lines in a narrow column),
# plotly grows the top margin for it instead of drawing it over the start of the data.
LEGEND_ABOVE = dict(orientation="h", yanchor="bottom", y=1.02, x=0)
