"""A sandbox's background processes (docs/sessions.md, "Processes"):
/v1/sandboxes/{id}/processes. ``sandbox.processes`` starts, lists,
feeds, signals and kills them, reads their events from a byte offset,
and attaches a ``Terminal`` to one; ``sandbox.terminal()`` starts a
shell on a pty and attaches.
"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.parse
import urllib.request
from typing import TYPE_CHECKING, Any, Iterator, NamedTuple

from .terminal import Terminal, open_terminal

if TYPE_CHECKING:
    from .sandbox import Sandbox

# Tried in order when a terminal is asked for without argv.
DEFAULT_SHELLS = (["bash"], ["sh"])


class ProcessEvent(NamedTuple):
    """One event of a process's stream: type is start, stdout, stderr,
    gap or exit; next is the byte offset to resume from after it; data
    is its JSON (for stdout and stderr, data["bytes"] holds the bytes)."""

    type: str
    next: int
    data: dict


class SandboxProcesses:
    """The processes of one sandbox, by pid."""

    def __init__(self, sandbox: "Sandbox"):
        self._sandbox = sandbox

    def start(self, argv: list[str], *, cwd: str | None = None, env: dict[str, str] | None = None,
              pty: tuple[int, int] | None = None, tag: str | None = None) -> dict:
        """Start argv in the background (pty: (cols, rows) for a
        pseudo-terminal of its own); returns the process, running."""
        body: dict[str, Any] = {"argv": list(argv)}
        if cwd is not None:
            body["cwd"] = cwd
        if env:
            body["env"] = env
        if pty is not None:
            body["pty"] = {"cols": int(pty[0]), "rows": int(pty[1])}
        if tag is not None:
            body["tag"] = tag
        return self._client._json("POST", self._path(), body)

    def list(self) -> list[dict]:
        """The running processes and the newest ended ones, oldest first."""
        return self._client._json("GET", self._path())["processes"]

    def get(self, pid: int) -> dict:
        return self._client._json("GET", self._path(pid))

    def kill(self, pid: int) -> dict:
        """TERM to its group, the kill grace, KILL; returns it ended."""
        return self._client._json("DELETE", self._path(pid))

    def signal(self, pid: int, signal: str) -> None:
        """Send signal ("INT", "TERM", "HUP", ...) to its process group."""
        self._client._json("POST", self._path(pid) + "/signal", {"signal": signal})

    def stdin(self, pid: int, data: bytes | str, eof: bool = False) -> dict:
        """Write data to its input; eof then ends it. Returns {"written_bytes", "eof"}."""
        body = data.encode() if isinstance(data, str) else bytes(data)
        query = "?eof=true" if eof else ""
        return self._client._json("POST", self._path(pid) + "/stdin" + query, body, content_type="application/octet-stream")

    def resize(self, pid: int, cols: int, rows: int) -> None:
        """Set the size of its pty (session.no_terminal without one)."""
        self._client._json("POST", self._path(pid) + "/resize", {"cols": int(cols), "rows": int(rows)})

    def events(self, pid: int, offset: int = 0, timeout: float | None = None) -> Iterator[ProcessEvent]:
        """Its events over SSE from byte offset (0: start, then what the
        buffer holds), until exit (the last one). timeout bounds each
        wait for the next event."""
        c = self._client
        url = c.base_url + self._path(pid) + "/events?" + urllib.parse.urlencode({"offset": int(offset)})
        req = urllib.request.Request(url, headers={"Accept": "text/event-stream"})
        if c.token:
            req.add_header("Authorization", "Bearer " + c.token)
        try:
            resp = urllib.request.urlopen(req, timeout=timeout or c.timeout)
        except urllib.error.HTTPError as e:
            from .client import _api_error

            raise _api_error(e) from None
        with resp:
            kind, nxt = "", offset
            for raw in resp:
                line = raw.decode().rstrip("\n")
                if line.startswith("id: "):
                    nxt = int(line[4:])
                elif line.startswith("event: "):
                    kind = line[7:]
                elif line.startswith("data: "):
                    data = json.loads(line[6:])
                    if kind in ("stdout", "stderr"):
                        data["bytes"] = base64.b64decode(data["data"]) if data.get("base64") else data["data"].encode()
                    yield ProcessEvent(kind, nxt, data)
                    if kind == "exit":
                        return
        from .client import APIError

        raise APIError(0, "run.io_failed", f"the event stream of process {pid} ended before the process did")

    def attach(self, pid: int, offset: int = 0) -> Terminal:
        """A terminal on process pid (any number may follow one), its
        output from offset."""
        return open_terminal(self._client, self._sandbox_path(), pid, offset)

    def terminal(self, argv: list[str] | None = None, *, cols: int = 80, rows: int = 24,
                 cwd: str | None = None, env: dict[str, str] | None = None, tag: str | None = None) -> Terminal:
        """Start argv (default: bash if the sandbox can start it, else sh)
        on a cols x rows pty and attach to it."""
        from .client import APIError

        candidates = [list(argv)] if argv else [list(s) for s in DEFAULT_SHELLS]
        for i, candidate in enumerate(candidates):
            try:
                proc = self.start(candidate, cwd=cwd, env=env, pty=(cols, rows), tag=tag)
                break
            except APIError as e:
                if i == len(candidates) - 1 or e.code not in ("run.spawn_failed", "policy.command_denied"):
                    raise
        try:
            return self.attach(proc["pid"])
        except BaseException:
            self.kill(proc["pid"])
            raise

    @property
    def _client(self):
        return self._sandbox._client

    def _sandbox_path(self) -> str:
        return "/v1/sandboxes/" + urllib.parse.quote(self._sandbox.id, safe="")

    def _path(self, pid: int | None = None) -> str:
        return self._sandbox_path() + "/processes" + (f"/{int(pid)}" if pid is not None else "")
