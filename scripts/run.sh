#!/usr/bin/env bash
# The main job: set up .venv if needed, then open the viewer (arguments go to `python -m app`).
# Without arguments it runs the demo: in a window when there is a display, otherwise headless
# along the scene's camera path, writing a frame log, a screenshot and a plot into out/.
# ensure-env.sh installs missing Debian packages (xvfb, xdotool, Mesa's EGL) with sudo apt-get,
# and says which and why before it does; CULLVIEW_NO_APT=1 only lists them.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/scripts/ensure-env.sh"
cd "$ROOT"
# Once after installing (and after an edit of app/): compile the kernels the viewer uses, with a
# progress bar, so that the viewer opens and switches indexes without compiling. A stamp in
# the kernel cache makes this a check of a few milliseconds the next time.
case " $* " in
    *" -h "* | *" --help "*) ;;
    *) if [ $# -eq 0 ] || [ "$1" = demo ]; then .venv/bin/python -m app warm --if-needed; fi ;;
esac
if [ $# -gt 0 ]; then
    exec .venv/bin/python -m app "$@"
fi
if [ -n "${DISPLAY:-}" ]; then
    exec .venv/bin/python -m app demo
fi
echo "no display: rendering the demo headless (for the window: xvfb-run -a ./scripts/run.sh demo)"
mkdir -p out
# 300 frames 2/15 s apart: one loop of the 40 s camera path inside a world larger than the
# view; the log's frustum_culled and distance_culled columns show 98 % of it culled every frame.
.venv/bin/python -m app demo --headless --frames 300 --dt 0.13333 --record out/demo.csv \
    --screenshot out/demo.png
exec .venv/bin/python -m app plot out/demo.csv -o out/demo-frames.png
