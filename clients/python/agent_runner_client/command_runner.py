"""cl-agent CommandRunner adapter: run a verifier command through agent-runner."""

from __future__ import annotations

import base64
import json
import os
import subprocess
from dataclasses import dataclass, field

from .client import APIError, Client
from .request import build_request


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

    ``readonly_mounts`` (workspace directories bound read-only in place,
    such as ``node_modules`` or ``.venv``), ``caches`` (``[{"name", "path"}]``
    build caches kept across jobs) and ``limits`` (``memory_mb``,
    ``cpu_count``, ``max_processes``, ``max_stdout_bytes``, ...) go into
    every request; ``run`` takes the same three for one call, replacing
    these (``limits`` are merged). ``timeout`` always sets
    ``limits.timeout_ms``. The runner validates them as for any request.
    """

    client: Client = field(default_factory=Client)
    allowed_commands: list | None = None
    backend: str | None = None
    trace: dict | None = None
    policy: dict = field(default_factory=dict)
    readonly_mounts: list | None = None
    caches: list | None = None
    limits: dict = field(default_factory=dict)

    def request(self, command: list[str], cwd: str, timeout: float, env: dict | None, *,
                readonly_mounts: list | None = None, caches: list | None = None, limits: dict | None = None) -> dict:
        if not isinstance(command, (list, tuple)) or not command or not all(isinstance(a, str) for a in command):
            raise ValueError("command must be a non-empty list of strings (no shell strings)")
        policy = dict(self.policy)
        policy.setdefault("allowed_commands", self.allowed_commands or [os.path.basename(command[0])])
        if env:
            policy.setdefault("allowed_env", sorted(env))
        merged = {**self.limits, **(limits or {}), "timeout_ms": max(1, int(timeout * 1000))}
        return build_request(
            command, cwd, env=env, policy=policy,
            readonly_mounts=self.readonly_mounts if readonly_mounts is None else readonly_mounts,
            caches=self.caches if caches is None else caches,
            limits=merged, backend=self.backend, trace=self.trace,
        )

    def run(self, command: list[str], *, cwd: str, timeout: float, env: dict | None = None,
            readonly_mounts: list | None = None, caches: list | None = None, limits: dict | None = None) -> CommandResult:
        req = self.request(command, cwd, timeout, env, readonly_mounts=readonly_mounts, caches=caches, limits=limits)
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
