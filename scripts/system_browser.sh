#!/usr/bin/env bash
# Best effort: a system Chromium, which the browser tests of the HTML pages drive with Playwright
# (its own browser download is not used). Without root or apt, those tests are skipped with the
# reason.
set -u
have_browser() {
  command -v chromium >/dev/null || command -v chromium-browser >/dev/null \
    || command -v google-chrome >/dev/null
}
if ! have_browser; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null; then
    (apt-get install -y -qq chromium >/dev/null 2>&1 \
      || (apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq chromium >/dev/null 2>&1)) \
      || echo "system_browser: could not install chromium; browser tests will be skipped"
  else
    echo "system_browser: no chromium on PATH and no root apt-get; browser tests will be skipped"
  fi
fi
exit 0
