#!/usr/bin/env bash
# Vendor @dagrejs/dagre (the studio graph view's layout library) at a pinned version.
#
# Usage: bash scripts/vendor_layout.sh <version>        e.g. bash scripts/vendor_layout.sh 3.1.3
#
# Downloads the package's tarball from the npm registry, checks it against the registry's
# dist.integrity (sha512), and unpacks its self-contained ES module build (graphlib bundled in),
# its licence and its bundled-licence notice into torchbend/studio/vendor/dagre-<version>/; removes
# the folder of any other version and points graph.js's import at the new one. The page then
# loads the library from the studio itself (/vendor/dagre-<version>/dagre.esm.js): nothing is
# fetched from the internet at run time. Run the studio's tests afterwards.
set -euo pipefail

version="${1:?usage: bash scripts/vendor_layout.sh <version>}"
root="$(cd "$(dirname "$0")/.." && pwd)"
vendor="$root/torchbend/studio/vendor"
target="$vendor/dagre-$version"
graph_js="$root/torchbend/studio/static/graph.js"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

curl -fsSL "https://registry.npmjs.org/@dagrejs/dagre/$version" -o "$work/meta.json"
read -r tarball integrity < <(python3 -c '
import json, sys
dist = json.load(open(sys.argv[1]))["dist"]
print(dist["tarball"], dist["integrity"])' "$work/meta.json")
case "$integrity" in
  sha512-*) ;;
  *) echo "vendor_layout: the registry gives no sha512 integrity for $version" >&2; exit 1 ;;
esac
curl -fsSL "$tarball" -o "$work/dagre.tgz"
actual="sha512-$(openssl dgst -sha512 -binary "$work/dagre.tgz" | base64 -w0)"
if [ "$actual" != "$integrity" ]; then
  echo "vendor_layout: $tarball does not match the registry's integrity" >&2
  echo "  expected $integrity" >&2
  echo "  got      $actual" >&2
  exit 1
fi
tar -xzf "$work/dagre.tgz" -C "$work"
module="$work/package/dist/dagre.esm.js"
# Self-contained: no import of another package (graphlib must be bundled in).
if grep -Eq '(^|[;}])import[ {*]|from"|from "' "$module"; then
  echo "vendor_layout: dagre.esm.js $version imports other modules; vendor them too" >&2
  exit 1
fi

rm -rf "$vendor"/dagre-*
mkdir -p "$target"
# The source map is not shipped: drop the comment that would make a browser's tools ask for it.
grep -v '^//# sourceMappingURL=' "$module" > "$target/dagre.esm.js"
cp "$work/package/dist/dagre.esm.js.LEGAL.txt" "$target/"
cp "$work/package/LICENSE" "$target/"
sed -i -E "s#\.\./vendor/dagre-[^/]+/dagre\.esm\.js#../vendor/dagre-$version/dagre.esm.js#" "$graph_js"
echo "vendored @dagrejs/dagre $version ($integrity) in ${target#"$root"/}"
