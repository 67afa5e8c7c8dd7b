#!/usr/bin/env bash
# Creates .venv (once) with torch 2.13 CPU and torchbend installed in editable mode.
# Usage: bash scripts/setup.sh [extras]   (default extras: dev)
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-dev}"
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install -q --disable-pip-version-check -c scripts/constraints.txt torch==2.13.0
.venv/bin/python -m pip install -q --disable-pip-version-check -c scripts/constraints.txt -e ".[${extras}]"
if [[ ",${extras}," == *",dev,"* ]]; then
  .venv/bin/python -m pip install -q --disable-pip-version-check --no-deps \
    -c scripts/constraints.txt -r scripts/test-nodeps.txt
fi
