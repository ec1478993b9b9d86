"""Composite events out: files (JSON lines, GeoParquet, GeoJSON), live alert sinks, maps."""
