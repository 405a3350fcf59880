"""A terminal on a sandbox's process (docs/sessions.md, "Terminal"):
its WebSocket, /v1/sandboxes/{id}/processes/{pid}/ws, in Kubernetes
exec framing (subprotocol v4.channel.k8s.io: the first byte of every
binary message is its channel, 0 stdin, 1 stdout, 2 stderr, 3 the
status once it ended, 4 a resize).
"""

from __future__ import annotations

import json
import socket
import time
from typing import TYPE_CHECKING

from .websocket import HandshakeError, WebSocket, error_body

if TYPE_CHECKING:
    from .client import Client

SUBPROTOCOL = "v4.channel.k8s.io"

_STDIN, _STDOUT, _STDERR, _STATUS, _RESIZE = 0, 1, 2, 3, 4


class Terminal:
    """A socket attached to one process: ``write`` types into it,
    ``read`` returns its output, ``resize`` sets its terminal's size,
    ``wait`` returns its exit code. Closing leaves the process running
    (``sandbox.processes.kill(pid)`` ends it)."""

    def __init__(self, ws: WebSocket, pid: int):
        self._ws = ws
        self.pid = pid
        self._pending = b""
        self._status: dict | None = None

    def __enter__(self) -> "Terminal":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def write(self, data: bytes | str) -> None:
        """Type data (str is UTF-8): b"\\x03" is Ctrl-C, b"\\x04" Ctrl-D."""
        data = data.encode() if isinstance(data, str) else bytes(data)
        for i in range(0, len(data), 32 << 10):
            self._ws.send(bytes([_STDIN]) + data[i:i + (32 << 10)])

    def resize(self, cols: int, rows: int) -> None:
        """Set the process's terminal to cols x rows."""
        self._ws.send(bytes([_RESIZE]) + json.dumps({"Width": int(cols), "Height": int(rows)}).encode())

    def read(self, timeout: float | None = None) -> bytes:
        """The next output (stdout and stderr), waiting up to timeout
        seconds (None: until some comes); b"" once the process ended.
        Raises TimeoutError when nothing came in time."""
        if self._pending:
            out, self._pending = self._pending, b""
            return out
        while self._status is None:
            msg = self._recv(timeout)
            if msg is None:
                break
            if msg:
                return msg
        return b""

    def read_until(self, marker: bytes | str, timeout: float = 60.0) -> bytes:
        """The output up to and including marker; TimeoutError (with what
        came) when it did not come within timeout seconds, EOFError when
        the process ended first. What follows the marker is kept for the
        next read."""
        marker = marker.encode() if isinstance(marker, str) else marker
        deadline = time.monotonic() + timeout
        seen = b""
        while marker not in seen:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"{marker!r} did not come within {timeout}s; the terminal showed {seen!r}")
            chunk = self.read(left)
            if not chunk:
                raise EOFError(f"the process ended before {marker!r}; it showed {seen!r}")
            seen += chunk
        end = seen.index(marker) + len(marker)
        self._pending = seen[end:] + self._pending
        return seen[:end]

    def wait(self, timeout: float | None = None) -> int:
        """Wait until the process ended and return its exit code (output
        not read yet stays readable). A process that ended without one
        (killed, timed out) raises APIError with its run's status as
        details["reason"]."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self._status is None:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            msg = self._recv(left)
            if msg is None:
                break
            self._pending += msg
        if self._status is None:
            raise _api_error("run.io_failed", f"the socket of process {self.pid} closed before the process ended")
        return _exit_code(self._status)

    def close(self) -> None:
        """Close the socket; the process keeps running."""
        self._ws.close()

    def _recv(self, timeout: float | None) -> bytes | None:
        """One message's output (b"" for none, as a status), or None when
        the socket closed."""
        self._ws.settimeout(timeout)
        try:
            msg = self._ws.recv()
        except socket.timeout:
            raise TimeoutError(f"no output from process {self.pid} within {timeout}s") from None
        if msg is None:
            return None
        _, payload = msg
        if not payload:
            return b""
        if payload[0] in (_STDOUT, _STDERR):
            return payload[1:]
        if payload[0] == _STATUS:
            self._status = json.loads(payload[1:])
        return b""


def open_terminal(client: "Client", sandbox_path: str, pid: int, offset: int = 0) -> Terminal:
    """Attach to process pid of the sandbox at sandbox_path."""
    headers = {"Authorization": "Bearer " + client.token} if client.token else {}
    url = client.base_url + sandbox_path + f"/processes/{pid}/ws?offset={int(offset)}"
    try:
        ws = WebSocket.connect(url, subprotocol=SUBPROTOCOL, headers=headers, timeout=client.timeout)
    except HandshakeError as e:
        err = error_body(e.body)
        if err is not None:
            from .client import APIError

            raise APIError(e.status, err.get("code", ""), err.get("message", ""), err.get("details")) from None
        raise
    return Terminal(ws, pid)


def _exit_code(status: dict) -> int:
    if status.get("status") == "Success":
        return 0
    if status.get("reason") == "NonZeroExitCode":
        for cause in (status.get("details") or {}).get("causes") or []:
            if cause.get("reason") == "ExitCode":
                return int(cause["message"])
    reason = status.get("reason", "")
    code = {"canceled": "run.canceled", "timed_out": "run.timed_out"}.get(reason, "run.signaled")
    raise _api_error(code, status.get("message", ""), {"reason": reason})


def _api_error(code: str, message: str, details: dict | None = None) -> Exception:
    from .client import APIError

    return APIError(0, code, message, details)
