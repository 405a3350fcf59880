import os
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
    proc = subprocess.Popen([binary, "serve", "--addr", f"127.0.0.1:{port}", "--store-dir", store, "--workers", "2", "--log-level", "warn",
                             "--workspace-root", tempfile.gettempdir()])
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


@pytest.fixture
def workspace():
    d = tempfile.mkdtemp(prefix="ar-ws-")
    os.chmod(d, 0o755)
    with open(os.path.join(d, "input.txt"), "w") as f:
        f.write("hello from the workspace\n")
    return d
