import time
import uuid

import pytest

from agent_runner_client import APIError, Client, Sandbox


def test_sandbox_exec_files_pause_timeout_delete(server, workspace):
    c = Client(server)
    owner = "py-" + uuid.uuid4().hex[:8]
    sandbox = c.create_sandbox(workspace=workspace, timeout=600, metadata={"owner": owner})
    assert isinstance(sandbox, Sandbox) and sandbox.state == "running" and sandbox.id.startswith("sbx_")

    res = sandbox.exec(["sh", "-c", "cat input.txt; echo kept > state.txt; echo err >&2; exit 3"])
    assert (res["status"], res["exit_code"], res["stdout"], res["stderr"]) == ("failed", 3, "hello from the workspace\n", "err\n")
    assert sandbox.exec(["cat", "state.txt"])["stdout"] == "kept\n"
    res = sandbox.exec(["sh", "-c", "echo $GREETING; cat"], env={"GREETING": "hi"}, stdin="from stdin")
    assert res["stdout"] == "hi\nfrom stdin"

    assert sandbox.files.write("src/main.sh", "#!/bin/sh\necho from the file\n", mode=0o755) == {"path": "src/main.sh", "size_bytes": 29}
    assert sandbox.files.read("src/main.sh") == b"#!/bin/sh\necho from the file\n"
    assert sandbox.exec(["./src/main.sh"])["stdout"] == "from the file\n"
    sandbox.files.write("bin.dat", bytes(range(256)))
    assert sandbox.files.read("bin.dat") == bytes(range(256))

    assert sandbox.pause().state == "paused"
    with pytest.raises(APIError) as e:
        sandbox.exec(["true"])
    assert (e.value.status, e.value.code, e.value.details["state"]) == (409, "session.not_running", "paused")
    with pytest.raises(APIError) as e:
        sandbox.files.write("x.txt", "x")
    assert e.value.code == "session.not_running"
    assert sandbox.files.read("state.txt") == b"kept\n"
    assert sandbox.resume().state == "running"

    assert sandbox.set_timeout(60).record["timeout_s"] == 60
    other = c.create_sandbox(metadata={"owner": owner + "-other"})
    assert [s.id for s in c.list_sandboxes(state="running", metadata={"owner": owner})] == [sandbox.id]
    assert [s.id for s in c.list_sandboxes(metadata={"owner": owner + "-other"})] == [other.id]

    deleted = sandbox.delete()
    assert deleted.state == "stopped" and deleted.record["execs"] == 4
    assert c.sandbox(sandbox.id).state == "stopped"
    assert c.list_sandboxes(state="running", metadata={"owner": owner}) == []
    other.delete()


def test_sandbox_errors(server):
    c = Client(server)
    sid = "py-" + uuid.uuid4().hex[:8]
    sandbox = c.create_sandbox(id=sid)
    try:
        assert c.create_sandbox(id=sid).id == sid  # the same request answers the sandbox
        cases = [
            (lambda: c.sandbox("sbx_none"), 404, "job.not_found"),
            (lambda: c.create_sandbox(id=sid, timeout=5), 409, "job.conflict"),
            (lambda: sandbox.files.read("../../etc/passwd"), 422, "validation.path_escape"),
            (lambda: sandbox.files.write("/etc/x", b"x"), 422, "validation.path_escape"),
            (lambda: sandbox.files.read("missing.txt"), 404, "job.not_found"),
            (lambda: sandbox.exec([]), 422, None),
        ]
        for call, status, code in cases:
            with pytest.raises(APIError) as e:
                call()
            assert e.value.status == status, e.value
            if code:
                assert e.value.code == code, e.value
    finally:
        sandbox.delete()
    with pytest.raises(APIError) as e:
        sandbox.exec(["true"])
    assert (e.value.code, e.value.details["state"]) == ("session.not_running", "stopped")


def test_sandbox_files_tree(server):
    c = Client(server)
    sandbox = c.create_sandbox()
    try:
        sandbox.files.write("src/a.txt", "0123456789", mode=0o600)
        sandbox.exec(["sh", "-c", "ln -s a.txt src/link && mkdir -p src/d/e && echo x > src/d/e/f"])
        listing = sandbox.files.list("src")
        assert (listing["path"], listing["truncated"]) == ("src", False)
        assert [(e["name"], e["path"], e["type"]) for e in listing["entries"]] == [
            ("a.txt", "src/a.txt", "file"), ("d", "src/d", "dir"), ("link", "src/link", "symlink")]
        a = listing["entries"][0]
        assert sorted(a) == ["mode", "modified_at", "name", "path", "size", "type"] and (a["size"], a["mode"]) == (10, "0600")
        assert [e["name"] for e in sandbox.files.list()["entries"]] == ["src"]
        st = sandbox.files.stat("src/link")
        assert (st["type"], st["symlink_target"]) == ("symlink", "a.txt")

        assert sandbox.files.read("src/a.txt", offset=2, length=3) == b"234"
        assert sandbox.files.read("src/a.txt", offset=7) == b"789"
        assert sandbox.files.read("src/a.txt", offset=-4) == b"6789"
        assert sandbox.files.move("src/a.txt", "out/b.txt") == {"from": "src/a.txt", "to": "out/b.txt"}
        assert sandbox.files.read("out/b.txt") == b"0123456789"

        sandbox.pause()
        assert [e["name"] for e in sandbox.files.list("out")["entries"]] == ["b.txt"]
        cases = [
            (lambda: sandbox.files.remove("src", recursive=True), 409, "session.not_running"),
            (lambda: sandbox.files.move("out", "elsewhere"), 409, "session.not_running"),
        ]
        for call, status, code in cases:
            with pytest.raises(APIError) as e:
                call()
            assert (e.value.status, e.value.code) == (status, code), e.value
        sandbox.resume()

        cases = [
            (lambda: sandbox.files.read("out/b.txt", offset=10), 416, "validation.range_not_satisfiable"),
            (lambda: sandbox.files.read("src"), 422, "validation.invalid_request"),
            (lambda: sandbox.files.list("out/b.txt"), 422, "validation.invalid_request"),
            (lambda: sandbox.files.stat("../etc/passwd"), 422, "validation.path_escape"),
            (lambda: sandbox.files.remove("src"), 409, "session.directory_not_empty"),
            (lambda: sandbox.files.move("out/b.txt", "src/link/x"), 422, "validation.path_escape"),
        ]
        for call, status, code in cases:
            with pytest.raises(APIError) as e:
                call()
            assert (e.value.status, e.value.code) == (status, code), e.value
        sandbox.files.remove("src", recursive=True)
        with pytest.raises(APIError) as e:
            sandbox.files.stat("src")
        assert e.value.code == "job.not_found"
    finally:
        sandbox.delete()


def test_sandbox_port(server, workspace):
    c = Client(server)
    sandbox = c.create_sandbox(workspace=workspace, timeout=600)
    try:
        assert sandbox.port_url(8000, "/input.txt?x=1") == f"{server}/v1/sandboxes/{sandbox.id}/ports/8000/input.txt?x=1"
        with pytest.raises(APIError) as e:
            sandbox.port_request(8000, "/input.txt")
        assert (e.value.status, e.value.code) == (502, "session.port_unreachable")
        with pytest.raises(APIError) as e:
            sandbox.port_request(0)
        assert (e.value.status, e.value.code) == (422, "validation.invalid_request")

        c._json("POST", f"/v1/sandboxes/{sandbox.id}/processes",
                {"argv": ["python3", "-m", "http.server", "8000", "--bind", "127.0.0.1"]})
        # Until it listens, the port is unreachable.
        for _ in range(600):
            try:
                status, headers, body = sandbox.port_request(8000, "/input.txt")
                break
            except APIError as err:
                assert err.code == "session.port_unreachable"
                time.sleep(0.05)
        assert (status, body) == (200, b"hello from the workspace\n")
        assert headers["Content-Security-Policy"].startswith("sandbox")
        # The server's own answers, errors too, are answers.
        status, _, _ = sandbox.port_request(8000, "/missing.txt")
        assert status == 404
        status, _, _ = sandbox.port_request(8000, "/", method="POST", data="a=b", content_type="application/x-www-form-urlencoded")
        assert status == 501
    finally:
        sandbox.delete()
