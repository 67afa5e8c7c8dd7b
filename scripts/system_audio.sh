#!/usr/bin/env bash
# Best effort: PortAudio, so the sound-card tests open a real stream (on ALSA's null device).
# Without root or apt, the tests that need them are skipped with the reason.
set -u
if ! ldconfig -p 2>/dev/null | grep -q libportaudio; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null; then
    (apt-get install -y -qq libportaudio2 >/dev/null 2>&1 \
      || (apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq libportaudio2 >/dev/null 2>&1)) \
      || echo "system_audio: could not install libportaudio2; sound-card tests will be skipped"
  fi
fi
# ALSA's null device needs no set-up here: tests/conftest.py points the test process at
# tests/alsa_null.conf (ALSA_CONFIG_PATH), leaving a developer's own configuration alone.
exit 0
