"""HTTP client for agent-runner, using only urllib and json."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Iterator

from . import sandbox as _sandbox
from .request import build_request

TERMINAL = {
    "completed",
    "failed",
    "timed_out",
    "policy_denied",
    "setup_failed",
    "backend_unavailable",
    "canceled",
}


TASK_TERMINAL = {"completed", "failed", "failed_preserved", "cancelled"}


class APIError(Exception):
    """An error answer from the server, with its stable code."""

    def __init__(self, status: int, code: str, message: str, details: dict | None = None):
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.details = details or {}

    def to_json(self) -> str:
        return json.dumps({"error": {"code": self.code, "message": self.message, "details": self.details}})


class Client:
    """A client for one agent-runner server."""

    def __init__(self, base_url: str = "http://127.0.0.1:3000", token: str | None = None, timeout: float = 30.0):
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout = timeout

    def _request(self, method: str, path: str, body: Any = None, timeout: float | None = None,
                 content_type: str = "application/json", headers: dict[str, str] | None = None) -> tuple[int, bytes, Any]:
        """Send one request; bytes bodies go as they are, others as JSON."""
        data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base_url + path, data=data, method=method, headers=headers or {})
        if data is not None:
            req.add_header("Content-Type", content_type)
        if self.token:
            req.add_header("Authorization", "Bearer " + self.token)
        try:
            with urllib.request.urlopen(req, timeout=timeout or self.timeout) as resp:
                return resp.status, resp.read(), resp.headers  # case-insensitive
        except urllib.error.HTTPError as e:
            raise _api_error(e) from None

    def _json(self, method: str, path: str, body: Any = None, timeout: float | None = None,
              content_type: str = "application/json") -> Any:
        _, raw, _ = self._request(method, path, body, timeout, content_type)
        return json.loads(raw)

    def submit(self, request: dict) -> dict:
        """Queue a RunJobRequest; returns {"job_id", "status"}."""
        return self._json("POST", "/v1/jobs", request)

    def status(self, job_id: str) -> dict:
        """The job's status, or its full RunJobResult once terminal."""
        return self._json("GET", "/v1/jobs/" + urllib.parse.quote(job_id, safe=""))

    def wait(self, job_id: str, timeout: float | None = None) -> dict:
        """Long-poll until the job is terminal and return its RunJobResult."""
        deadline = None if timeout is None else time.monotonic() + timeout
        path = "/v1/jobs/" + urllib.parse.quote(job_id, safe="") + "?wait=20s"
        while True:
            res = self._json("GET", path, timeout=40)
            if res.get("status") in TERMINAL:
                return res
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"job {job_id} not finished after {timeout}s")

    def run(self, request: dict, timeout: float | None = None) -> dict:
        """Submit and wait."""
        return self.wait(self.submit(request)["job_id"], timeout)

    def run_command(self, argv: list[str], workspace: str, *, timeout: float | None = None, **fields: Any) -> dict:
        """Build a RunJobRequest for argv in a snapshot of workspace, submit
        it and wait for its RunJobResult.

        ``fields`` are build_request's: cwd, env, policy, readonly_mounts,
        caches, limits, backend, trace.
        """
        return self.run(build_request(argv, workspace, **fields), timeout)

    def cancel(self, job_id: str) -> dict:
        return self._json("DELETE", "/v1/jobs/" + urllib.parse.quote(job_id, safe=""))

    def artifacts(self, job_id: str) -> list[dict]:
        return self._json("GET", "/v1/jobs/" + urllib.parse.quote(job_id, safe="") + "/artifacts")["artifacts"]

    def download(self, job_id: str, path: str) -> tuple[bytes, str]:
        """Artifact bytes and the sha256 the server recorded for them."""
        quoted = "/".join(urllib.parse.quote(p, safe="") for p in path.split("/"))
        _, raw, headers = self._request("GET", "/v1/jobs/" + urllib.parse.quote(job_id, safe="") + "/artifacts/" + quoted)
        return raw, headers.get("X-Content-SHA256", "")

    # Agent tasks (docs/tasks.md): /api/v1/tasks.

    def submit_task(self, manifest_yaml: str | bytes) -> dict:
        """Submit a task manifest (YAML text); returns {"task_id", "accepted"}."""
        body = manifest_yaml.encode() if isinstance(manifest_yaml, str) else manifest_yaml
        return self._json("POST", "/api/v1/tasks", body, content_type="application/yaml")

    def task(self, task_id: str) -> dict:
        """A task's status: state, reason, timestamps, name, labels, and metadata once finished."""
        return self._json("GET", _task_path(task_id))

    def list_tasks(self, state: list[str] | str | None = None, labels: dict[str, str] | None = None,
                   limit: int | None = None, cursor: str | None = None) -> dict:
        """One page of tasks, newest first: {"tasks", "next_cursor"?, "total_count", ...}.

        state is a state or a list of states; labels must all match; pass
        the page's next_cursor as cursor for the next page.
        """
        query: list[tuple[str, str]] = []
        if state:
            query.append(("state", state if isinstance(state, str) else ",".join(state)))
        for k, v in (labels or {}).items():
            query.append(("label", f"{k}={v}"))
        if limit is not None:
            query.append(("limit", str(limit)))
        if cursor:
            query.append(("cursor", cursor))
        path = "/api/v1/tasks" + ("?" + urllib.parse.urlencode(query) if query else "")
        return self._json("GET", path)

    def iter_tasks(self, state: list[str] | str | None = None, labels: dict[str, str] | None = None,
                   page_size: int = 100) -> Iterator[dict]:
        """Every matching task, newest first, following next_cursor."""
        cursor = None
        while True:
            page = self.list_tasks(state, labels, page_size, cursor)
            yield from page["tasks"]
            cursor = page.get("next_cursor")
            if not cursor:
                return

    def wait_task(self, task_id: str, timeout: float | None = None, every: float = 0.2) -> dict:
        """Poll until the task is terminal and return its status."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            st = self.task(task_id)
            if st.get("state") in TASK_TERMINAL:
                return st
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"task {task_id} not finished after {timeout}s")
            time.sleep(every)

    def cancel_task(self, task_id: str) -> dict:
        """Cancel a task (TERM, grace, KILL; its children too); returns its status."""
        return self._json("DELETE", _task_path(task_id))

    def destroy_task(self, task_id: str) -> dict:
        """Remove a terminal task's preserved workspace; returns its status."""
        return self._json("POST", _task_path(task_id) + "/destroy")

    def task_logs(self, task_id: str, timeout: float | None = None) -> Iterator[tuple[str, Any]]:
        """Follow the task's logs over SSE until it is terminal.

        Yields ("stdout" | "stderr", line) for each scrubbed line, then
        ("completed", final status) last.
        """
        req = urllib.request.Request(self.base_url + _task_path(task_id) + "/logs", headers={"Accept": "text/event-stream"})
        if self.token:
            req.add_header("Authorization", "Bearer " + self.token)
        try:
            resp = urllib.request.urlopen(req, timeout=timeout or self.timeout)
        except urllib.error.HTTPError as e:
            raise _api_error(e) from None
        with resp:
            event = ""
            for raw in resp:
                line = raw.decode().rstrip("\n")
                if line.startswith("event: "):
                    event = line[len("event: "):]
                elif line.startswith("data: "):
                    data = json.loads(line[len("data: "):])
                    if event == "completed":
                        yield event, data
                        return
                    yield event, data["line"]
        raise APIError(0, "run.io_failed", f"log stream of task {task_id} ended before the task did")

    def task_artifacts(self, task_id: str) -> list[dict]:
        """A finished task's artifacts: [{"name", "size_bytes", "sha256"}]."""
        return self._json("GET", _task_path(task_id) + "/artifacts")["artifacts"]

    def download_task_artifact(self, task_id: str, name: str) -> tuple[bytes, str]:
        """Artifact bytes and the sha256 the server recorded for them."""
        quoted = "/".join(urllib.parse.quote(p, safe="") for p in name.split("/"))
        _, raw, headers = self._request("GET", _task_path(task_id) + "/artifacts/" + quoted)
        return raw, headers.get("X-Content-SHA256", "")

    # Kept sandboxes (docs/sessions.md): /v1/sandboxes (sandbox.py).

    def create_sandbox(self, *, id: str | None = None, backend: str | None = None, workspace: str | None = None,
                       limits: dict | None = None, policy: dict | None = None, network: dict | None = None,
                       timeout: int | None = None, metadata: dict[str, str] | None = None) -> _sandbox.Sandbox:
        """Create a kept sandbox (workspace: a directory under serve's
        --workspace-root to copy; timeout: seconds) and return it running."""
        return _sandbox.create(self, id=id, backend=backend, workspace=workspace, limits=limits, policy=policy,
                               network=network, timeout=timeout, metadata=metadata)

    def sandbox(self, sandbox_id: str) -> _sandbox.Sandbox:
        """The sandbox sandbox_id (job.not_found when there is none)."""
        return _sandbox.Sandbox(self, self._json("GET", "/v1/sandboxes/" + urllib.parse.quote(sandbox_id, safe="")))

    def list_sandboxes(self, state: str | None = None, metadata: dict[str, str] | None = None) -> list[_sandbox.Sandbox]:
        """Sandboxes, oldest first, in state (if given) and matching every metadata pair."""
        return _sandbox.list_all(self, state, metadata)


def _task_path(task_id: str) -> str:
    return "/api/v1/tasks/" + urllib.parse.quote(task_id, safe="")


def _api_error(e: urllib.error.HTTPError) -> APIError:
    raw = e.read()
    try:
        err = json.loads(raw)["error"]
        return APIError(e.code, err.get("code", ""), err.get("message", ""), err.get("details"))
    except (ValueError, KeyError, TypeError):
        return APIError(e.code, "internal.error", raw.decode(errors="replace"))
