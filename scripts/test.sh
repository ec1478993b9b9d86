#!/usr/bin/env bash
# Set everything up, then run the whole test suite (slow end-to-end tests included).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export CI=${CI:-}
# two xdist workers (SPATEC_TEST_WORKERS=0: one process); the Spark-session tests share one worker
exec .venv/bin/python -m pytest -q -p no:cacheprovider --durations=25 \
  -n "${SPATEC_TEST_WORKERS:-2}" --dist loadgroup "$@"
