"""The project's datasets (registry, fetch, open) and synthetic traces."""
