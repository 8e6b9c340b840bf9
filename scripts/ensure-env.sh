#!/usr/bin/env bash
# Create or reuse .venv at the repository root and install the project with its test extras.
# Debian packages that are missing are installed first, after saying which and why:
#   xvfb, xdotool                          the real-window test (a virtual screen, its key presses)
#   libegl1 libegl-mesa0 libgl1-mesa-dri   Mesa's EGL: OpenGL without a display (--headless)
# Nothing is printed about them when they are present. CULLVIEW_NO_APT=1 only lists what is
# missing (install it yourself). --packages-only stops after the Debian packages.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

need_apt=()
why=()
if ! command -v Xvfb >/dev/null 2>&1 || ! command -v xvfb-run >/dev/null 2>&1; then
    need_apt+=(xvfb)
    why+=("  xvfb                                   a virtual screen (xvfb-run) for the real-window test")
fi
if ! command -v xdotool >/dev/null 2>&1; then
    need_apt+=(xdotool)
    why+=("  xdotool                                presses keys in that window during the test")
fi
if [ ! -e /usr/lib/x86_64-linux-gnu/libEGL_mesa.so.0 ] \
        && [ ! -e /usr/lib/aarch64-linux-gnu/libEGL_mesa.so.0 ]; then
    need_apt+=(libegl1 libegl-mesa0 libgl1-mesa-dri)
    why+=("  libegl1 libegl-mesa0 libgl1-mesa-dri   Mesa's EGL: OpenGL without a display (--headless, the tests)")
fi
if [ ${#need_apt[@]} -gt 0 ]; then
    SUDO=()
    how="apt-get (running as root)"
    if [ "$(id -u)" -ne 0 ]; then
        SUDO=(sudo)
        how="sudo apt-get (sudo may ask for your password)"
    fi
    if [ -n "${CULLVIEW_NO_APT:-}" ] || { [ ${#SUDO[@]} -gt 0 ] && ! command -v sudo >/dev/null 2>&1; }; then
        {
            echo "ensure-env: these Debian packages are missing and will not be installed" \
                 "(CULLVIEW_NO_APT is set, or there is no sudo):"
            printf '%s\n' "${why[@]}"
            echo "ensure-env: as root: apt-get install -y ${need_apt[*]}"
        } >&2
    else
        {
            echo "ensure-env: installing Debian packages with $how:"
            printf '%s\n' "${why[@]}"
        } >&2
        "${SUDO[@]}" apt-get update -qq >/dev/null
        DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y -qq "${need_apt[@]}" >/dev/null
        echo "ensure-env: installed ${need_apt[*]}" >&2
    fi
fi
if [ "${1:-}" = "--packages-only" ]; then
    exit 0
fi

if [ ! -x .venv/bin/python ]; then
    echo "ensure-env: creating .venv (python3 -m venv)" >&2
    python3 -m venv .venv
fi
# Reinstall only when pyproject.toml changed since the last install.
stamp=.venv/.installed-$(sha1sum pyproject.toml | cut -c1-12)
if [ ! -e "$stamp" ]; then
    echo "ensure-env: installing the project and its test extras into .venv (pip)" >&2
    .venv/bin/python -m pip install -q --upgrade pip >/dev/null
    .venv/bin/python -m pip install -q -e ".[test]"
    rm -f .venv/.installed-*
    touch "$stamp"
fi
