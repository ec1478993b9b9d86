"""Live feeds: the sources a live run polls or watches, and the recorded-feed server."""
