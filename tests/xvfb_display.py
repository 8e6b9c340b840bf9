"""A private Xvfb display for the real-window tests, started without races.

``xvfb-run -a`` guesses a free display number and writes an xauth file that a test then reads
back; two test workers starting at once could pick the same number or read a half-written
file. Here Xvfb picks a free number itself (``-displayfd``: it takes the number's lock file
atomically and writes the number to a pipe only once it accepts connections), listens on its
unix socket only (``-nolisten tcp``) and uses no xauth cookie, so nothing is guessed or read
back: the number arrives when the server is ready, or the start fails within seconds.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import subprocess
import time
from pathlib import Path
from types import TracebackType

SCREEN = "1280x720x24"


def xvfb_installed() -> bool:
    """True when the ``Xvfb`` server binary is on PATH."""
    return shutil.which("Xvfb") is not None


class XvfbError(RuntimeError):
    """Xvfb did not start, or clients could not connect to it."""


class XvfbDisplay:
    """One Xvfb server; :attr:`env` is ``os.environ`` with its ``DISPLAY`` (for any client).

    Use as a context manager (or call :meth:`stop`): the server is killed at exit.
    """

    def __init__(self, log: Path, screen: str = SCREEN, timeout: float = 10.0,
                 attempts: int = 3) -> None:
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None
        self.display = ""
        problems: list[str] = []
        for _ in range(attempts):  # a failed start (seen never so far) is retried elsewhere
            try:
                self._start(screen, timeout)
                break
            except XvfbError as exc:
                problems.append(str(exc))
                self.stop()
        else:
            raise XvfbError("Xvfb did not start: " + " | ".join(problems))
        env = dict(os.environ, DISPLAY=self.display)
        # No cookie to send: an empty authority file, not the user's own display's cookie.
        env["XAUTHORITY"] = os.devnull
        for var in ("WAYLAND_DISPLAY", "PYGLET_HEADLESS"):
            env.pop(var, None)
        self.env = env

    def _start(self, screen: str, timeout: float) -> None:
        """Start Xvfb, read its display number from the pipe, check that a client connects."""
        read_fd, write_fd = os.pipe()
        try:
            with open(self.log, "ab") as err:
                self.proc = subprocess.Popen(
                    ["Xvfb", "-displayfd", str(write_fd), "-screen", "0", screen,
                     "-nolisten", "tcp", "-noreset"],
                    pass_fds=(write_fd,), stdin=subprocess.DEVNULL, stdout=err, stderr=err,
                    start_new_session=True)
            os.close(write_fd)
            write_fd = -1
            number = self._read_number(read_fd, timeout)
        finally:
            os.close(read_fd)
            if write_fd >= 0:
                os.close(write_fd)
        self.display = f":{number}"
        self._check_client(timeout)

    def _read_number(self, fd: int, timeout: float) -> int:
        """The display number Xvfb writes (``"N\\n"``) once it is ready; EOF means it died."""
        deadline = time.monotonic() + timeout
        data = b""
        while not data.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0:
                raise XvfbError(f"no display number within {timeout} s; {self._log_tail()}")
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 64)
                if not chunk:
                    raise XvfbError(f"Xvfb exited ({self._returncode()}) before it was "
                                    f"ready; {self._log_tail()}")
                data += chunk
        return int(data.strip())

    def _check_client(self, timeout: float) -> None:
        """A client (xdotool, as the tests use) can open the display."""
        env = dict(os.environ, DISPLAY=self.display, XAUTHORITY=os.devnull)
        try:
            r = subprocess.run(["xdotool", "getdisplaygeometry"], env=env, capture_output=True,
                               text=True, timeout=timeout)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise XvfbError(f"xdotool on {self.display}: {exc}") from None
        if r.returncode != 0:
            raise XvfbError(f"xdotool cannot open {self.display}: {r.stderr.strip()}; "
                            f"{self._log_tail()}")

    def _returncode(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def _log_tail(self) -> str:
        try:
            return "Xvfb said: " + self.log.read_text(errors="replace")[-1500:].strip()
        except OSError:
            return "no Xvfb log"

    def stop(self) -> None:
        """Terminate the server (its lock file and socket go with it), kill it if it hangs."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    def __enter__(self) -> XvfbDisplay:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
