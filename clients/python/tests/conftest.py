import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.abspath(os.path.join(HERE, "..")))


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def server():
    """A real `agent-runner serve` on loopback, built from this checkout."""
    tmp = tempfile.mkdtemp(prefix="ar-py-")
    os.chmod(tmp, 0o755)
    binary = os.path.join(tmp, "agent-runner")
    subprocess.run(["go", "build", "-o", binary, "./cmd/agent-runner"], cwd=REPO, check=True)
    port = _free_port()
    store = os.path.join(tmp, "store")
    # Agent tasks run on local_process (no isolation) so that a shell-script
    # agent needs nothing of the host; jobs stay on the default backend.
    proc = subprocess.Popen([binary, "serve", "--addr", f"127.0.0.1:{port}", "--store-dir", store, "--workers", "2", "--log-level", "warn",
                             "--workspace-root", tempfile.gettempdir(),
                             "--task-backend", "local_process", "--unsafe-local-process"])
    url = f"http://127.0.0.1:{port}"
    for _ in range(200):
        try:
            urllib.request.urlopen(url + "/health", timeout=1)
            break
        except OSError:
            time.sleep(0.05)
    else:
        proc.kill()
        raise RuntimeError("agent-runner serve did not start")
    yield url
    proc.terminate()
    proc.wait(timeout=30)
    shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture
def workspace():
    d = tempfile.mkdtemp(prefix="ar-ws-")
    os.chmod(d, 0o755)
    with open(os.path.join(d, "input.txt"), "w") as f:
        f.write("hello from the workspace\n")
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def origin():
    """A git repository on branch main whose agent.sh is a task's agent:
    it prints to both streams, edits a.txt (the task's patch) and, given
    "slow", sleeps until cancelled."""
    d = tempfile.mkdtemp(prefix="ar-origin-")
    os.chmod(d, 0o755)
    files = {"a.txt": "one\n", "agent.sh": 'echo working\necho two > a.txt\nif [ "$1" = slow ]; then sleep 30; fi\necho done >&2\n'}
    for name, content in files.items():
        with open(os.path.join(d, name), "w") as f:
            f.write(content)
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@x", GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@x")
    for args in (["init", "--quiet", "--initial-branch=main"], ["add", "."], ["commit", "--quiet", "-m", "init"]):
        subprocess.run(["git", *args], cwd=d, env=env, check=True)
    yield d
    shutil.rmtree(d, ignore_errors=True)
