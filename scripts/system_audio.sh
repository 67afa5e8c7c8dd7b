#!/usr/bin/env bash
# Best effort: PortAudio and ALSA's null device, so the sound-card tests open a real stream.
# Without root or apt, the tests that need them are skipped with the reason.
set -u
if ! ldconfig -p 2>/dev/null | grep -q libportaudio; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null; then
    (apt-get install -y -qq libportaudio2 >/dev/null 2>&1 \
      || (apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq libportaudio2 >/dev/null 2>&1)) \
      || echo "system_audio: could not install libportaudio2; sound-card tests will be skipped"
  fi
fi
# Only in CI (CI=true): a developer's own ALSA configuration is left alone.
if [ -n "${CI:-}" ] && [ ! -e "$HOME/.asoundrc" ]; then
  printf 'pcm.!default {\n    type null\n}\n' > "$HOME/.asoundrc"
fi
exit 0
