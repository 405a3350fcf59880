"""readonly_mounts, caches and limits through CommandRunner and Client,
against the real `agent-runner serve` of conftest (jobs on linux_sandbox;
a loopback serve without tokens keeps caches in the local namespace)."""

import json
import os
import uuid

import pytest

from agent_runner_client import Client, CommandRunner, build_request


@pytest.fixture
def project(workspace):
    """The workspace with installed dependencies in node_modules."""
    os.makedirs(os.path.join(workspace, "node_modules", "dep"))
    with open(os.path.join(workspace, "node_modules", "dep", "index.js"), "w") as f:
        f.write("installed")
    for d in ("node_modules", os.path.join("node_modules", "dep")):
        os.chmod(os.path.join(workspace, d), 0o755)
    return workspace


READ_DEP = """
print(open("node_modules/dep/index.js").read())
try:
    open("node_modules/dep/new.js", "w")
    print("WROTE")
except OSError as e:
    print("READ-ONLY", type(e).__name__)
"""


def test_request_carries_mounts_caches_and_limits():
    runner = CommandRunner(readonly_mounts=["node_modules"], limits={"memory_mb": 512, "max_processes": 64})
    caches = [{"name": "pip", "path": "/cache/pip"}]
    req = runner.request(["python3", "-m", "pytest"], "/repo", 30, {"CI": "1"}, caches=caches, limits={"max_stdout_bytes": 1000})
    assert req == {
        "workspace": {"path": "/repo", "readonly_mounts": ["node_modules"], "caches": caches},
        "command": {"argv": ["python3", "-m", "pytest"], "cwd": ".", "env": {"CI": "1"}},
        "policy": {"allowed_commands": ["python3"], "allowed_env": ["CI"]},
        "limits": {"memory_mb": 512, "max_processes": 64, "max_stdout_bytes": 1000, "timeout_ms": 30000},
    }
    # A call's readonly_mounts replace the runner's; an empty list drops them.
    assert "readonly_mounts" not in runner.request(["true"], "/repo", 1, None, readonly_mounts=[])["workspace"]


def test_build_request_refuses_shell_strings():
    with pytest.raises(ValueError):
        build_request("pytest -q", "/repo")
    with pytest.raises(ValueError):
        build_request(["pytest"], "/repo", readonly_mounts="node_modules")


def test_readonly_mounts_are_bound_read_only(server, project):
    runner = CommandRunner(client=Client(server), readonly_mounts=["node_modules"])
    res = runner.run(["python3", "-c", READ_DEP], cwd=project, timeout=60)
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith(b"installed\nREAD-ONLY"), res.stdout
    assert not os.path.exists(os.path.join(project, "node_modules", "dep", "new.js"))


def test_caches_outlive_the_job(server, workspace):
    runner = CommandRunner(client=Client(server))
    cache = [{"name": "py-" + uuid.uuid4().hex[:8], "path": "/cache/py"}]
    res = runner.run(["python3", "-c", "open('/cache/py/stamp', 'w').write('kept')"], cwd=workspace, timeout=60, caches=cache)
    assert res.returncode == 0, res.stderr
    res = runner.run(["python3", "-c", "print(open('/cache/py/stamp').read())"], cwd=workspace, timeout=60, caches=cache)
    assert (res.returncode, res.stdout) == (0, b"kept\n"), res.stderr


def test_limits_pass_through(server, workspace):
    runner = CommandRunner(client=Client(server), limits={"max_stdout_bytes": 10, "max_processes": 64, "memory_mb": 512})
    res = runner.run(["python3", "-c", "print('x' * 1000)"], cwd=workspace, timeout=60)
    assert res.returncode == 0, res.stderr
    assert res.stdout == b"x" * 10


def test_invalid_limit_is_the_stable_error(server, workspace):
    runner = CommandRunner(client=Client(server))
    res = runner.run(["true"], cwd=workspace, timeout=30, limits={"memory_mb": -1})
    assert res.returncode == 125
    err = json.loads(res.stderr)["error"]
    assert (err["code"], err["details"]["field"]) == ("validation.invalid_request", "limits.memory_mb")


def test_invalid_readonly_mount_is_the_stable_error(server, workspace):
    runner = CommandRunner(client=Client(server))
    res = runner.run(["true"], cwd=workspace, timeout=30, readonly_mounts=["../elsewhere"])
    assert res.returncode == 125
    err = json.loads(res.stderr)["error"]
    assert (err["code"], err["details"]["field"]) == ("validation.path_escape", "workspace.readonly_mounts")


def test_client_run_command(server, project):
    c = Client(server)
    res = c.run_command(["python3", "-c", READ_DEP], project, timeout=60,
                        policy={"allowed_commands": ["python3"]}, readonly_mounts=["node_modules"],
                        limits={"timeout_ms": 60000, "max_processes": 64})
    assert res["status"] == "completed", res
    assert res["stdout"]["text"].startswith("installed\nREAD-ONLY")
