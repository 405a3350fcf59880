"""Standard-library client for the agent-runner HTTP API.

``Client`` submits RunJobRequests and reads results, and submits, lists,
follows, cancels and collects agent tasks; ``CommandRunner``
adapts agent-runner to cl-agent's injectable command-runner protocol::

    run(command: list[str], *, cwd: str, timeout: float, env: dict | None)
        -> CommandResult(returncode: int, stdout: bytes, stderr: bytes)
"""

from .client import APIError, Client
from .command_runner import CommandResult, CommandRunner

__all__ = ["APIError", "Client", "CommandResult", "CommandRunner"]
