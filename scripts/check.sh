#!/usr/bin/env bash
# The one check command: set-up, lint, format, types, tests.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh dev
bash scripts/system_audio.sh
bash scripts/system_browser.sh
bash scripts/system_pd.sh
# The real nn~ host (tests/pdhost.py): a build of nn~'s Pd external kept beside the project
# (a test tool, never shipped); the tests that need it skip with the reason where it is absent.
if [ -z "${TORCHBEND_NNTILDE:-}" ] && [ -f ../shared/nntilde/nn~.pd_linux ]; then
  TORCHBEND_NNTILDE="$(cd ../shared/nntilde && pwd)"
  export TORCHBEND_NNTILDE
fi
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
.venv/bin/lint-imports
# One worker a core, each on one thread (tests/conftest.py), a test file a worker (module
# fixtures are made once); add -n 0 to run in one process.
.venv/bin/python -m pytest -q -n auto --dist loadfile "$@"
