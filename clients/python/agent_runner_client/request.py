"""Build a RunJobRequest for one argv.

The runner validates what it receives (docs/api.md); this module only puts
each value where the request has it, so that every door (HTTP, the MCP
``sandbox.run`` tool, this client) carries the same request.
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Sequence


def build_request(
    argv: Sequence[str],
    workspace: str,
    *,
    cwd: str = ".",
    env: Mapping[str, str] | None = None,
    policy: Mapping[str, Any] | None = None,
    readonly_mounts: Sequence[str] | None = None,
    readonly_mounts_mode: str | None = None,
    caches: Sequence[Mapping[str, str]] | None = None,
    limits: Mapping[str, int] | None = None,
    backend: str | None = None,
    trace: Mapping[str, Any] | None = None,
) -> dict:
    """A RunJobRequest running argv in a snapshot of workspace.

    ``readonly_mounts`` are directories of the workspace (``"node_modules"``,
    ``".venv"``) bound read-only in place instead of copied; ``caches`` are
    build caches kept across jobs, ``[{"name": "go-build", "path":
    "/cache/go-build"}]``; ``limits`` are the request's limits
    (``timeout_ms``, ``memory_mb``, ``cpu_count``, ``max_processes``,
    ``max_stdout_bytes``, ...). Each is passed as given; an empty or None
    value leaves the field out (the runner's default).
    """
    if isinstance(argv, (str, bytes)) or not argv or not all(isinstance(a, str) for a in argv):
        raise ValueError("argv must be a non-empty list of strings (no shell strings)")
    ws: dict[str, Any] = {"path": os.path.abspath(workspace)}
    if readonly_mounts:
        if isinstance(readonly_mounts, str):
            raise ValueError("readonly_mounts must be a list of directories, not a string")
        ws["readonly_mounts"] = list(readonly_mounts)
        if readonly_mounts_mode:
            ws["readonly_mounts_mode"] = readonly_mounts_mode
    if caches:
        ws["caches"] = [dict(c) for c in caches]
    command: dict[str, Any] = {"argv": list(argv), "cwd": cwd}
    if env:
        command["env"] = dict(env)
    req: dict[str, Any] = {"workspace": ws, "command": command, "policy": dict(policy or {})}
    if limits:
        req["limits"] = dict(limits)
    if backend:
        req["backend"] = {"kind": backend}
    if trace:
        req["trace"] = dict(trace)
    return req
