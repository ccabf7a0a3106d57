"""Frames → what the site shows: charts, formatted figures, Hugo data, the step notebooks, the execution cache and the build."""
