"""Kept sandboxes (docs/sessions.md): /v1/sandboxes.

``Client.create_sandbox`` returns a ``Sandbox``, a handle over one kept
sandbox: ``exec`` runs a command in it and waits, ``files`` reads (whole
or a range), writes, lists, stats, removes and moves its workspace's
files, ``processes`` runs background processes and ``terminal`` opens an
interactive one (processes.py, terminal.py), ``pause``/``resume``/
``set_timeout``/``delete`` control its life; ``port_url`` and
``port_request`` reach a server listening on a port inside it. Every call
raises ``APIError`` with the server's stable code (``session.not_running``
on a paused or ended one).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import TYPE_CHECKING, Any

from .processes import SandboxProcesses
from .terminal import Terminal

if TYPE_CHECKING:
    from .client import Client


def _path(sandbox_id: str) -> str:
    return "/v1/sandboxes/" + urllib.parse.quote(sandbox_id, safe="")


def _port_path(sandbox_id: str, port: int, path: str) -> str:
    return _path(sandbox_id) + "/ports/" + str(int(port)) + "/" + path.lstrip("/")


class SandboxFiles:
    """A sandbox's files, by path relative to its workspace."""

    def __init__(self, sandbox: "Sandbox"):
        self._sandbox = sandbox

    def read(self, path: str, *, offset: int | None = None, length: int | None = None) -> bytes:
        """The regular file's bytes (job.not_found when it is missing); with
        offset, length bytes from there (None: to the end) as one HTTP range,
        a negative offset its last -offset bytes (a range past the end is
        validation.range_not_satisfiable). A directory raises
        validation.invalid_request (list() lists it)."""
        headers = {}
        if offset is not None:
            if offset < 0:
                headers["Range"] = f"bytes=-{-offset}"
            elif length:
                headers["Range"] = f"bytes={offset}-{offset + length - 1}"
            else:
                headers["Range"] = f"bytes={offset}-"
        _, raw, hdrs = self._sandbox._client._request("GET", self._url(path), headers=headers)
        if (hdrs.get("Content-Type") or "").startswith("application/json"):
            from .client import APIError  # client imports this module
            raise APIError(422, "validation.invalid_request", f"{path} is a directory", {"path": path})
        return raw

    def list(self, path: str = "") -> dict:
        """The directory's listing ("" is the workspace root): {"path", "entries":
        [{"name", "path", "type" (file, dir, symlink, other), "size", "mode"
        ("0644"), "modified_at"}], "truncated"}, sorted by name."""
        _, raw, hdrs = self._sandbox._client._request("GET", self._url(path))
        if not (hdrs.get("Content-Type") or "").startswith("application/json"):
            from .client import APIError  # client imports this module
            raise APIError(422, "validation.invalid_request", f"{path} is not a directory", {"path": path})
        return json.loads(raw)

    def stat(self, path: str) -> dict:
        """One entry as lstat describes it; a symlink with its "symlink_target"."""
        return self._sandbox._client._json("GET", _path(self._sandbox.id) + "/files/stat?" + urllib.parse.urlencode({"path": path}))

    def remove(self, path: str, recursive: bool = False) -> None:
        """Remove a file, a symlink (the link) or an empty directory; a directory
        with entries only with recursive (else session.directory_not_empty)."""
        query = {"recursive": "true" if recursive else "false"}
        self._sandbox._client._request("DELETE", self._url(path, query))

    def move(self, src: str, dst: str) -> dict:
        """Rename src to dst, creating dst's parents; what is at dst is replaced
        unless it is a directory with entries. Returns {"from", "to"}."""
        return self._sandbox._client._json("POST", _path(self._sandbox.id) + "/files/move", {"from": src, "to": dst})

    def write(self, path: str, data: bytes | str, mode: int | None = None) -> dict:
        """Write data (str is UTF-8) atomically, creating missing parents;
        mode is permission bits (0o755), default 0o644. Returns {"path", "size_bytes"}."""
        body = data.encode() if isinstance(data, str) else bytes(data)
        query = {"mode": format(mode, "o")} if mode is not None else {}
        return self._sandbox._client._json("PUT", self._url(path, query), body, content_type="application/octet-stream")

    def _url(self, path: str, extra: dict | None = None) -> str:
        return _path(self._sandbox.id) + "/files?" + urllib.parse.urlencode({"path": path, **(extra or {})})


class Sandbox:
    """One kept sandbox. ``record`` is its record as the server last
    answered it (id, state, backend, expires_at, metadata, execs, ...)."""

    def __init__(self, client: "Client", record: dict):
        self._client = client
        self.record = record
        self.files = SandboxFiles(self)
        self.processes = SandboxProcesses(self)

    @property
    def id(self) -> str:
        return self.record["id"]

    @property
    def state(self) -> str:
        """The state as last answered (refresh() asks again)."""
        return self.record["state"]

    def __repr__(self) -> str:
        return f"Sandbox(id={self.id!r}, state={self.state!r})"

    def refresh(self) -> "Sandbox":
        """Read the record again."""
        self.record = self._client._json("GET", _path(self.id))
        return self

    def exec(self, argv: list[str], *, cwd: str | None = None, env: dict[str, str] | None = None,
             stdin: str | None = None, timeout: float | None = None) -> dict:
        """Run argv in the sandbox and wait: {"run_id", "status", "exit_code",
        "stdout", "stderr", "truncated", "duration_ms", "error"?}. A policy
        denial or a timeout is a result (its status), not an exception."""
        body: dict[str, Any] = {"argv": list(argv)}
        if cwd is not None:
            body["cwd"] = cwd
        if env:
            body["env"] = env
        if stdin is not None:
            body["stdin"] = stdin
        if timeout is not None:
            body["timeout_s"] = max(1, int(timeout))
        # The HTTP wait outlasts the exec's own timeout (the server's default is 120 s).
        http_timeout = max(self._client.timeout, (timeout if timeout is not None else 120) + 30)
        return self._client._json("POST", _path(self.id) + "/exec", body, timeout=http_timeout)

    def terminal(self, argv: list[str] | None = None, *, cols: int = 80, rows: int = 24, **fields: Any) -> Terminal:
        """Start argv (default: bash, else sh) on a cols x rows pty and
        attach a Terminal to it (processes.py; fields: cwd, env, tag)."""
        return self.processes.terminal(argv, cols=cols, rows=rows, **fields)

    def pause(self) -> "Sandbox":
        """Freeze every process of the sandbox."""
        return self._set(self._client._json("POST", _path(self.id) + "/pause"))

    def resume(self) -> "Sandbox":
        """Thaw a paused sandbox."""
        return self._set(self._client._json("POST", _path(self.id) + "/resume"))

    def set_timeout(self, seconds: int) -> "Sandbox":
        """Make the sandbox expire that many seconds from now."""
        return self._set(self._client._json("POST", _path(self.id) + "/timeout", {"timeout_s": int(seconds)}))

    def delete(self) -> "Sandbox":
        """Kill its processes and remove its workspace; the record stays, stopped."""
        return self._set(self._client._json("DELETE", _path(self.id)))

    def port_url(self, port: int, path: str = "/") -> str:
        """The URL that proxies to path (with its query, as written) on a
        server listening on 127.0.0.1:port inside the sandbox (docs/sessions.md,
        "Ports"); a request to it needs the client's token in Authorization,
        which the server in the sandbox never sees (port_request sends it)."""
        return self._client.base_url + _port_path(self.id, port, path)

    def port_request(self, port: int, path: str = "/", *, method: str = "GET", data: bytes | str | None = None,
                     content_type: str | None = None, headers: dict[str, str] | None = None,
                     timeout: float | None = None) -> tuple[int, Any, bytes]:
        """Send one request through the port route and return (status,
        headers, body) as the server in the sandbox answered it: its own
        errors (a 404 of its) are answers, not exceptions. What the runner
        refuses raises APIError: a bad port (422), nothing listening (502
        session.port_unreachable), a paused or ended sandbox (409
        session.not_running). Every answer of the sandbox's server carries
        the proxy's Content-Security-Policy (sandbox ...); the runner's own
        refusals do not, which is how the two are told apart."""
        body = data.encode() if isinstance(data, str) else data
        req = urllib.request.Request(self.port_url(port, path), data=body, method=method)
        for k, v in (headers or {}).items():
            req.add_header(k, v)
        if content_type is not None:
            req.add_header("Content-Type", content_type)
        if self._client.token:
            req.add_header("Authorization", "Bearer " + self._client.token)
        try:
            with urllib.request.urlopen(req, timeout=timeout or self._client.timeout) as resp:
                return resp.status, resp.headers, resp.read()
        except urllib.error.HTTPError as e:
            if any(v.startswith("sandbox") for v in e.headers.get_all("Content-Security-Policy") or []):
                return e.code, e.headers, e.read()
            from .client import _api_error  # client imports this module
            raise _api_error(e) from None

    def _set(self, record: dict) -> "Sandbox":
        self.record = record
        return self


def create(client: "Client", *, id: str | None = None, backend: str | None = None, workspace: str | None = None,
           limits: dict | None = None, policy: dict | None = None, network: dict | None = None,
           timeout: int | None = None, metadata: dict[str, str] | None = None) -> Sandbox:
    """POST /v1/sandboxes with the fields given (the others take serve's defaults)."""
    body: dict[str, Any] = {}
    for key, value in (("id", id), ("backend", backend), ("limits", limits), ("policy", policy),
                       ("network", network), ("metadata", metadata)):
        if value is not None:
            body[key] = value
    if workspace is not None:
        body["workspace"] = {"path": workspace}
    if timeout is not None:
        body["timeout_s"] = int(timeout)
    return Sandbox(client, client._json("POST", "/v1/sandboxes", body))


def list_all(client: "Client", state: str | None = None, metadata: dict[str, str] | None = None) -> list[Sandbox]:
    """The sandboxes in state (if given) whose metadata holds every pair given, oldest first."""
    query = [("state", state)] if state else []
    query += [("metadata." + k, v) for k, v in sorted((metadata or {}).items())]
    path = "/v1/sandboxes" + ("?" + urllib.parse.urlencode(query) if query else "")
    return [Sandbox(client, rec) for rec in client._json("GET", path)["sandboxes"]]
