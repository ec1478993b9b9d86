#!/usr/bin/env bash
# Set everything up, then run the whole test suite (slow end-to-end tests included).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export CI=${CI:-}
exec .venv/bin/python -m pytest -q -p no:cacheprovider --durations=25 "$@"
