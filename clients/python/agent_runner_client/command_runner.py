"""cl-agent CommandRunner adapter: run a verifier command through agent-runner."""

from __future__ import annotations

import base64
import json
import os
import subprocess
from dataclasses import dataclass, field

from .client import APIError, Client


@dataclass
class CommandResult:
    returncode: int
    stdout: bytes
    stderr: bytes


def _output_bytes(out: dict) -> bytes:
    # "base64" carries the exact bytes when they are not valid UTF-8.
    if out.get("base64"):
        return base64.b64decode(out["base64"])
    return out.get("text", "").encode()


@dataclass
class CommandRunner:
    """Implements ``run(command, *, cwd, timeout, env)`` on agent-runner.

    ``cwd`` is the workspace that is snapshotted (the job runs in a copy of
    it, never in place). Every env key passed is allowed for that job; the
    runner still decides which commands may run (``allowed_commands``, by
    default the command's own basename) and never uses a shell.
    """

    client: Client = field(default_factory=Client)
    allowed_commands: list | None = None
    backend: str | None = None
    trace: dict | None = None
    policy: dict = field(default_factory=dict)

    def request(self, command: list[str], cwd: str, timeout: float, env: dict | None) -> dict:
        if not isinstance(command, (list, tuple)) or not command or not all(isinstance(a, str) for a in command):
            raise ValueError("command must be a non-empty list of strings (no shell strings)")
        policy = dict(self.policy)
        policy.setdefault("allowed_commands", self.allowed_commands or [os.path.basename(command[0])])
        if env:
            policy.setdefault("allowed_env", sorted(env))
        req = {
            "workspace": {"path": os.path.abspath(cwd)},
            "command": {"argv": list(command), "cwd": ".", "env": dict(env or {})},
            "policy": policy,
            "limits": {"timeout_ms": max(1, int(timeout * 1000))},
        }
        if self.backend:
            req["backend"] = {"kind": self.backend}
        if self.trace:
            req["trace"] = dict(self.trace)
        return req

    def run(self, command: list[str], *, cwd: str, timeout: float, env: dict | None = None) -> CommandResult:
        req = self.request(command, cwd, timeout, env)
        try:
            res = self.client.run(req)
        except APIError as e:
            # The request never became a job (validation, queue full): a
            # failed command result carrying the stable error.
            return CommandResult(returncode=125, stdout=b"", stderr=e.to_json().encode())
        status = res.get("status")
        if status == "timed_out":
            raise subprocess.TimeoutExpired(command, timeout, output=_output_bytes(res["stdout"]), stderr=_output_bytes(res["stderr"]))
        if status in ("policy_denied", "backend_unavailable", "setup_failed", "canceled"):
            return CommandResult(returncode=126 if status == "policy_denied" else 125, stdout=b"", stderr=json.dumps({"status": status, "error": res.get("error")}).encode())
        code = res.get("exit_code")
        if code is None:  # killed by a signal
            code = 128 + 9
        return CommandResult(returncode=code, stdout=_output_bytes(res["stdout"]), stderr=_output_bytes(res["stderr"]))
