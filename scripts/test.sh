#!/usr/bin/env bash
# The test command: set up .venv if needed, lint, then run the whole test suite.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/scripts/ensure-env.sh"
cd "$ROOT"
.venv/bin/ruff check app tests
exec .venv/bin/python -m pytest -n 2 "$@"
