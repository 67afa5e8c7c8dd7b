#!/usr/bin/env bash
# The main job: set-up, then the demo (the shipped character model, tiny_ddsp, bent several ways
# on the shipped sounds, its named latent channels walked, each bending measured).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh demo
.venv/bin/torchbend demo "$@"
