#!/usr/bin/env bash
# `sandgate mcp` driven by the official MCP SDK clients over stdio: the
# Python SDK (pinned in python/requirements.txt, installed into a virtual
# environment) and the TypeScript SDK (pinned in ts/package-lock.json,
# installed by `npm ci`).
#
# Needs: python3 with venv, node >= 18, npm.
# SANDGATE_BIN: the sandgate binary under test (required).
# SANDGATE_MCP_VENV: where the virtual environment lives (default:
# ../../../target/mcp-venv).
set -euo pipefail
cd "$(dirname "$0")"
: "${SANDGATE_BIN:?set SANDGATE_BIN to the sandgate binary}"
export SANDGATE_BIN

venv="${SANDGATE_MCP_VENV:-../../../target/mcp-venv}"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r python/requirements.txt
"$venv/bin/python" -m pytest -q -p no:cacheprovider python

cd ts
npm ci --no-audit --no-fund
node --test
