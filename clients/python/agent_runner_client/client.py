"""HTTP client for agent-runner, using only urllib and json."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

TERMINAL = {
    "completed",
    "failed",
    "timed_out",
    "policy_denied",
    "setup_failed",
    "backend_unavailable",
    "canceled",
}


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

    def _request(self, method: str, path: str, body: Any = None, timeout: float | None = None) -> tuple[int, bytes, Any]:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base_url + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if self.token:
            req.add_header("Authorization", "Bearer " + self.token)
        try:
            with urllib.request.urlopen(req, timeout=timeout or self.timeout) as resp:
                return resp.status, resp.read(), resp.headers  # case-insensitive
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                err = json.loads(raw)["error"]
                raise APIError(e.code, err.get("code", ""), err.get("message", ""), err.get("details")) from None
            except (ValueError, KeyError, TypeError):
                raise APIError(e.code, "internal.error", raw.decode(errors="replace")) from None

    def _json(self, method: str, path: str, body: Any = None, timeout: float | None = None) -> Any:
        _, raw, _ = self._request(method, path, body, timeout)
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

    def cancel(self, job_id: str) -> dict:
        return self._json("DELETE", "/v1/jobs/" + urllib.parse.quote(job_id, safe=""))

    def artifacts(self, job_id: str) -> list[dict]:
        return self._json("GET", "/v1/jobs/" + urllib.parse.quote(job_id, safe="") + "/artifacts")["artifacts"]

    def download(self, job_id: str, path: str) -> tuple[bytes, str]:
        """Artifact bytes and the sha256 the server recorded for them."""
        quoted = "/".join(urllib.parse.quote(p, safe="") for p in path.split("/"))
        _, raw, headers = self._request("GET", "/v1/jobs/" + urllib.parse.quote(job_id, safe="") + "/artifacts/" + quoted)
        return raw, headers.get("X-Content-SHA256", "")
