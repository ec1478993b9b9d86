"""The Spark runners: session, ingest, staging, exchange, scheduling, batch replay, live."""
