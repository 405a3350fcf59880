"""Standard-library client for the agent-runner HTTP API.

``Client`` submits RunJobRequests (``build_request`` makes one for an
argv, with readonly_mounts, caches and limits) and reads results, and
submits, lists, follows, cancels and collects agent tasks, and creates
and uses kept sandboxes (``create_sandbox`` returns a ``Sandbox``, whose
``terminal()`` is an interactive process over a WebSocket);
``CommandRunner`` adapts agent-runner to cl-agent's injectable
command-runner protocol::

    run(command: list[str], *, cwd: str, timeout: float, env: dict | None,
        readonly_mounts=None, caches=None, limits=None)
        -> CommandResult(returncode: int, stdout: bytes, stderr: bytes)
"""

from .client import APIError, Client
from .command_runner import CommandResult, CommandRunner
from .request import build_request
from .processes import ProcessEvent, SandboxProcesses
from .sandbox import Sandbox, SandboxFiles
from .terminal import Terminal

__all__ = ["APIError", "Client", "CommandResult", "CommandRunner", "ProcessEvent", "Sandbox", "SandboxFiles",
           "SandboxProcesses", "Terminal", "build_request"]
