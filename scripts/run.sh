#!/usr/bin/env bash
# The main job: set up .venv if needed, then run it (arguments go to `python -m app`).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/scripts/ensure-env.sh"
cd "$ROOT"
if [ $# -eq 0 ]; then
    set -- bench index --quick
fi
exec .venv/bin/python -m app "$@"
