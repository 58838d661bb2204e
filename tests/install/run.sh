#!/usr/bin/env bash
# The fresh-install test, run by `cargo xtask install-test` from a new
# temporary directory that holds this script, the check programs and a copy
# of dist/: with neither cargo nor rustc on PATH and the checkout hidden, it
# installs each artifact as a user would and runs a check against it. Each
# check confines a read, sees an escape refused and runs a confined
# command; any failure stops the test with a non-zero status.
#
# Environment: SANDGATE_VERSION (the package version), SANDGATE_CHECKOUT
# (the checkout's path, which must not be reachable here).
set -euo pipefail
work="$(cd "$(dirname "$0")" && pwd)"
cd "$work"
v="${SANDGATE_VERSION:?}"
dist="$work/dist"

fail() { echo "install-test: FAIL: $*" >&2; exit 1; }
# Prints a section's title and, when the next one starts, how long it took.
section_start=$SECONDS
section() {
  if [ -n "${section_name:-}" ]; then echo "   ($section_name: $((SECONDS - section_start))s)"; fi
  section_name="$1"
  section_start=$SECONDS
  [ "$1" = done ] || echo "== $1"
}

for tool in cargo rustc; do
  if command -v "$tool" >/dev/null 2>&1; then fail "$tool is on PATH ($(command -v "$tool"))"; fi
done
if [ -e "${SANDGATE_CHECKOUT:?}/Cargo.toml" ]; then fail "the checkout $SANDGATE_CHECKOUT is reachable"; fi
echo "install-test: in $work; cargo and rustc are not on PATH; $SANDGATE_CHECKOUT is hidden"

# What every check works on: a workspace the policy grants and a private
# directory beside it that nothing may read.
mkdir -p tree/workspace tree/private
printf 'hello from the workspace\n' > tree/workspace/note.txt
printf 'top secret\n' > tree/private/secret.txt
cat > tree/policy.toml <<'EOF'
security_mode = "restricted"

[fs]
read_roots = ["workspace"]
write_root = "workspace"

[exec]
enabled = true
shell = "/bin/sh"
timeout_ms = 10000
confine = "best_effort"
EOF
policy="$work/tree/policy.toml"

section "C: the library tree, through pkg-config"
prefix="$work/prefix"
mkdir -p "$prefix"
tar -xzf "$dist/sandgate-$v-x86_64-linux-gnu.tar.gz" -C "$prefix" --strip-components=1
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
# shellcheck disable=SC2046 # pkg-config's flags are words
gcc -std=c11 -Wall -Wextra -Werror -o c-shared check.c $(pkg-config --cflags --libs sandgate)
readelf -d c-shared | grep -q 'NEEDED.*\[libsandgate\.so\.2\]' || fail "c-shared does not load libsandgate.so.2"
echo "-- linked to libsandgate.so.2 (pkg-config sandgate)"
LD_LIBRARY_PATH="$prefix/lib" ./c-shared "$policy"
# shellcheck disable=SC2046
gcc -std=c11 -Wall -Wextra -Werror -o c-static check.c $(pkg-config --static --cflags --libs sandgate-static)
if readelf -d c-static | grep -q 'NEEDED.*libsandgate'; then fail "c-static needs libsandgate.so"; fi
echo "-- linked to libsandgate.a (pkg-config --static sandgate-static)"
./c-static "$policy"

section "Python: a new venv installs the wheel"
python3 -m venv venv
venv/bin/python -m pip install --quiet --no-index "$dist"/sandgate-"$v"-*.whl
venv/bin/python check.py "$policy"

section "Node: a new npm project installs the two tarballs"
mkdir node-project
cp check.js node-project/
(
  cd node-project
  npm init -y >/dev/null
  npm install --offline --no-audit --no-fund --silent "$dist/sandgate-$v.tgz" "$dist/sandgate-linux-x64-gnu-$v.tgz"
  node check.js "$policy"
)
# On a machine whose glibc is older than the addon needs, the platform
# package installs (npm checks the libc's family, not its version) and its
# addon fails to load: the error says so, naming the loader's reason, and
# does not claim the package is missing. An older glibc is played here by
# renaming the newest glibc version the addon needs to one no glibc has.
cp -a node-project node-old-glibc
addon=node-old-glibc/node_modules/sandgate-linux-x64-gnu/sandgate.linux-x64-gnu.node
python3 - "$addon" <<'PY'
import re, sys
data = open(sys.argv[1], "rb").read()
newest = max(set(re.findall(rb"GLIBC_2\.[0-9]{2}\0", data)), key=lambda v: int(v[8:-1]))
open(sys.argv[1], "wb").write(data.replace(newest, b"GLIBC_2.99\0"))
PY
old_glibc="$(cd node-old-glibc && node -e "try { require('sandgate') } catch (e) { console.log(e.code + ': ' + e.message) }")"
echo "-- an older glibc: $old_glibc"
case "$old_glibc" in
  *"not installed"*) fail "an addon that fails to load is reported as not installed: $old_glibc" ;;
esac
case "$old_glibc" in
  ERR_SANDGATE_ADDON_LOAD:*"GLIBC_2.99"*) ;;
  *) fail "an addon that fails to load is not reported with the loader's reason: $old_glibc" ;;
esac

section "Go: a module outside the checkout, linked through pkg-config"
tar -xzf "$dist/sandgate-go-$v.tar.gz" -C "$work"
mkdir go-project
cp check.go go-project/main.go
cat > go-project/go.mod <<EOF
module sandgatecheck

go 1.24

require github.com/sandgate-dev/sandgate/bindings/go v$v

replace github.com/sandgate-dev/sandgate/bindings/go => ../sandgate-go-$v
EOF
(cd go-project && GOWORK=off GOPROXY=off GOFLAGS=-mod=mod CGO_ENABLED=1 go build -o ../go-check .)
if readelf -d go-check | grep -q 'NEEDED.*libsandgate'; then fail "go-check needs libsandgate.so"; fi
./go-check "$policy"

section "man: the page installs under a prefix and names this version"
install -D -m 644 "$dist/man/sandgate.1" "$prefix/share/man/man1/sandgate.1"
head -n 5 "$prefix/share/man/man1/sandgate.1" | grep -q "^\.TH sandgate 1 .*\"sandgate $v\"" \
  || fail "the man page does not name sandgate $v"
if command -v man >/dev/null 2>&1; then
  [ "$(MANPATH="$prefix/share/man" man -w sandgate)" = "$prefix/share/man/man1/sandgate.1" ] \
    || fail "man does not find the page under $prefix/share/man"
  echo "-- man -w sandgate: $prefix/share/man/man1/sandgate.1"
fi

section done
echo "install-test: 6 passed, 0 failed"
