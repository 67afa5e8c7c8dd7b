#!/usr/bin/env bash
# Vendor the graph view's layout library, @dagrejs/dagre (MIT), at a pinned version:
#   bash scripts/vendor_layout.sh [VERSION]
# downloads the package's tarball from the npm registry, checks it against the sha512
# integrity the registry's metadata gives for that version, and unpacks its ES module build and
# its licence into torchbend/studio/vendor/dagre-VERSION/ (served as /static/vendor/...); the
# import line of torchbend/studio/static/graph.js is pointed at it and older versions removed.
# The page itself never fetches anything from the internet.
set -euo pipefail
version="${1:-3.1.3}"
root="$(cd "$(dirname "$0")/.." && pwd)"
vendor="$root/torchbend/studio/vendor"
target="$vendor/dagre-$version"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

curl -fsS "https://registry.npmjs.org/@dagrejs/dagre/$version" -o "$work/meta.json"
read -r integrity tarball < <(python3 - "$work/meta.json" <<'PY'
import json, sys
dist = json.load(open(sys.argv[1]))["dist"]
print(dist["integrity"], dist["tarball"])
PY
)
case "$integrity" in
  sha512-*) ;;
  *) echo "vendor_layout: the registry gives no sha512 integrity ($integrity)" >&2; exit 1 ;;
esac
curl -fsS "$tarball" -o "$work/dagre.tgz"
got="sha512-$(openssl dgst -sha512 -binary "$work/dagre.tgz" | base64 -w0)"
if [ "$got" != "$integrity" ]; then
  echo "vendor_layout: $tarball is $got, the registry says $integrity" >&2
  exit 1
fi
tar -xzf "$work/dagre.tgz" -C "$work"
rm -rf "$vendor"/dagre-*
mkdir -p "$target"
cp "$work/package/dist/dagre.esm.js" "$work/package/LICENSE" "$target/"
printf '@dagrejs/dagre %s\n%s\n%s\n' "$version" "$tarball" "$integrity" > "$target/SOURCE"
sed -i -E "s#\./vendor/dagre-[^/]+/dagre\.esm\.js#./vendor/dagre-$version/dagre.esm.js#" \
  "$root/torchbend/studio/static/graph.js"
echo "vendored @dagrejs/dagre $version into ${target#"$root"/}"
