#!/usr/bin/env bash
# The one check command: set-up, lint, format, types, tests.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh dev
bash scripts/system_audio.sh
bash scripts/system_browser.sh
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
.venv/bin/lint-imports
# One worker a core, each on one thread (tests/conftest.py), a test file a worker (module
# fixtures are made once); add -n 0 to run in one process.
.venv/bin/python -m pytest -q -n auto --dist loadfile "$@"
