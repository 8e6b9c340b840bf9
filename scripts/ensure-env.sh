#!/usr/bin/env bash
# Create or reuse .venv at the repository root and install the project with its test extras.
# Installs Debian's xvfb and xdotool (for the real-window tests) when they are missing.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

need_apt=()
command -v Xvfb >/dev/null 2>&1 || need_apt+=(xvfb)
command -v xdotool >/dev/null 2>&1 || need_apt+=(xdotool)
command -v xvfb-run >/dev/null 2>&1 || need_apt+=(xvfb)
[ -e /usr/lib/x86_64-linux-gnu/libEGL_mesa.so.0 ] || [ -e /usr/lib/aarch64-linux-gnu/libEGL_mesa.so.0 ] \
    || need_apt+=(libegl1 libegl-mesa0 libgl1-mesa-dri)
if [ ${#need_apt[@]} -gt 0 ]; then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    echo "installing Debian packages: ${need_apt[*]}" >&2
    $SUDO apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
# Reinstall only when pyproject.toml changed since the last install.
stamp=.venv/.installed-$(sha1sum pyproject.toml | cut -c1-12)
if [ ! -e "$stamp" ]; then
    .venv/bin/python -m pip install -q --upgrade pip >/dev/null
    .venv/bin/python -m pip install -q -e ".[test]"
    rm -f .venv/.installed-*
    touch "$stamp"
fi
