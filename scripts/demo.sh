#!/usr/bin/env bash
# The main job: set-up, then the demo (the shipped model bent several ways on the shipped sounds).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh demo
.venv/bin/torchbend demo "$@"
