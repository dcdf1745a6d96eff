#!/usr/bin/env bash
# Set up and run every check: lint, format, types, and the test suite — unit, loop,
# and end-to-end tests that drive the real agent CLIs against a local model server.
# Usage: bash scripts/test.sh [pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."

python=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$python" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'

# The real agent CLIs, at the versions pinned in tests/e2e/package-lock.json, cached.
cache=${AUTOPILOT_E2E_CACHE:-$HOME/.cache/autopilot-e2e}
mkdir -p "$cache"
stamp=$(sha256sum tests/e2e/package-lock.json | cut -d' ' -f1)
if [ "$(cat "$cache/.installed" 2>/dev/null)" != "$stamp" ] || [ ! -d "$cache/node_modules" ]; then
  cp tests/e2e/package.json tests/e2e/package-lock.json "$cache/"
  # npm ci rejects this lock (opencode-ai lists platform packages without versions);
  # npm install with the lock present installs exactly the locked versions.
  (cd "$cache" && npm install --no-audit --no-fund --loglevel=error)
  echo "$stamp" > "$cache/.installed"
fi
export AUTOPILOT_E2E_BIN_DIR="$cache/node_modules/.bin"

.venv/bin/ruff check src tests benchmarks
.venv/bin/ruff format --check src tests benchmarks
.venv/bin/mypy
.venv/bin/pytest "$@"
