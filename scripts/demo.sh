#!/usr/bin/env bash
# The main job: set-up, then the demo (bends a small audio model several ways).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh tensordict
.venv/bin/python examples/demo.py "$@"
