#!/usr/bin/env bash
# CI for the Node binding (bindings/node): install the pinned napi CLI,
# build the addon, check that the committed generated loader (binding.js)
# and typings (binding.d.ts) are what the build generates, then run the
# tests. index.js and index.d.ts are written by hand and wrap them.
#
# Needs: node >= 18 (20 here), npm, cargo. Honours CARGO_TARGET_DIR.
# SANDGATE_NODE_RELEASE=1 builds with --release (slower to build).
#
# `ci.sh build` stops after the check, `ci.sh test` only runs the tests
# (of an addon already built): `cargo xtask ci` builds while the Rust tests
# run and tests later. Without an argument, both.
set -euo pipefail
cd "$(dirname "$0")"

what="${1:-all}"
case "$what" in
  all | build | test) ;;
  *)
    echo "usage: ci.sh [build|test]" >&2
    exit 2
    ;;
esac
if [ "$what" = test ]; then
  exec node --test
fi

npm ci --no-audit --no-fund

saved="$(mktemp -d)"
trap 'rm -rf "$saved"' EXIT
cp binding.js binding.d.ts "$saved/"

if [ "${SANDGATE_NODE_RELEASE:-0}" = 1 ]; then
  npx napi build --platform --release --js binding.js --dts binding.d.ts
else
  npx napi build --platform --js binding.js --dts binding.d.ts
fi

for f in binding.js binding.d.ts; do
  if ! cmp -s "$f" "$saved/$f"; then
    echo "bindings/node/$f differs from what 'napi build --platform --js binding.js --dts binding.d.ts' generates:" >&2
    diff -u "$saved/$f" "$f" >&2 || true
    echo "commit the regenerated file" >&2
    exit 1
  fi
done

if [ "$what" = all ]; then
  node --test
fi
