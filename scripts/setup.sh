#!/usr/bin/env bash
# Set up everything spatec needs on a fresh machine: a virtualenv in .venv with
# the package (editable) and its pinned dependencies. Java 17 must be on PATH
# (it is on every project machine). Safe to run again: it only installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
if ! .venv/bin/python -c "import spatec, pyspark, lark, shapely, pytest" >/dev/null 2>&1 \
   || [ pyproject.toml -nt .venv/.spatec-installed ] || [ requirements.lock -nt .venv/.spatec-installed ]; then
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -c requirements.lock -e ".[test]"
  touch .venv/.spatec-installed
fi
