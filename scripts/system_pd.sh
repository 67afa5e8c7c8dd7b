#!/usr/bin/env bash
# Best effort: Pure Data (puredata-core), the host in which the real-host tests play exported
# files through nn~ (tests/pdhost.py). nn~ itself is not installed here: it is a test tool under
# CC BY-NC that never ships with torchbend; the check command points the tests at a build of it
# (TORCHBEND_NNTILDE). Without root or apt, the tests that need Pd are skipped with the reason.
set -u
if ! command -v pd >/dev/null; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null; then
    packages="puredata-core libcurl4"
    # shellcheck disable=SC2086
    (apt-get install -y -qq $packages >/dev/null 2>&1 \
      || (apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq $packages >/dev/null 2>&1)) \
      || echo "system_pd: could not install puredata-core; the real nn~ host tests will be skipped"
  else
    echo "system_pd: no pd on PATH and no root apt-get; the real nn~ host tests will be skipped"
  fi
fi
exit 0
