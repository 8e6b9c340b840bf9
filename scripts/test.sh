#!/usr/bin/env bash
# The test command: set up .venv if needed, lint, then run the test suite on 2 workers.
#   ./scripts/test.sh              the everyday tier (minutes; see README "Developing")
#   ./scripts/test.sh --thorough   every test: all cold-compile cases in their own processes,
#                                  the benchmarks' full smoke runs, 400 hypothesis examples
# Any other arguments go to pytest (e.g. -k pairs, -x).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/scripts/ensure-env.sh"
cd "$ROOT"
.venv/bin/ruff check app tests
exec .venv/bin/python -m pytest -n 2 "$@"
