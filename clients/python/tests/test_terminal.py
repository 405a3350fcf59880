import uuid

import pytest

from agent_runner_client import APIError, Client, Terminal


def test_terminal_resize_interrupt_exit(server):
    c = Client(server)
    sandbox = c.create_sandbox(metadata={"owner": "py-" + uuid.uuid4().hex[:8]})
    try:
        with sandbox.terminal(["sh"], cols=90, rows=20) as term:
            assert isinstance(term, Terminal) and term.pid > 0
            term.write("stty size\n")
            assert b"20 90" in term.read_until("20 90")
            term.resize(100, 30)
            term.write("stty size\n")
            term.read_until("30 100")
            # The foreground process says it is armed as it becomes sleep:
            # only an interrupt that reaches it ends it with 130.
            term.write("sh -c 'echo arm''ed; exec sleep 100'\n")
            term.read_until("armed")
            term.write(b"\x03")
            term.write("echo back-$?\n")
            term.read_until("back-130")
            term.write("exit 3\n")
            assert term.wait(timeout=60) == 3
            assert b"exit 3" in term.read()  # what wait read stays readable
            assert term.read() == b""
        [proc] = [p for p in sandbox.processes.list() if p["pid"] == term.pid]
        assert (proc["state"], proc["exit_code"], proc["pty"]) == ("exited", 3, True)
    finally:
        sandbox.delete()


def test_terminal_default_shell_and_reattach(server):
    c = Client(server)
    sandbox = c.create_sandbox()
    try:
        term = sandbox.terminal()
        term.write("echo shell-$((6*7))\n")
        term.read_until("shell-42")
        term.close()  # the shell keeps running
        assert sandbox.processes.get(term.pid)["state"] == "running"
        again = sandbox.processes.attach(term.pid)
        assert b"shell-42" in again.read_until("shell-42")  # from offset 0: the buffer
        sandbox.processes.kill(term.pid)
        with pytest.raises(APIError) as e:
            again.wait(timeout=60)
        assert (e.value.code, e.value.details["reason"]) == ("run.canceled", "canceled")
        with pytest.raises(APIError) as e:
            sandbox.processes.attach(999999)
        assert (e.value.status, e.value.code) == (404, "job.not_found")
    finally:
        sandbox.delete()


def test_background_processes(server):
    c = Client(server)
    sandbox = c.create_sandbox()
    try:
        proc = sandbox.processes.start(["sh", "-c", "echo one; read x; echo err-$x >&2; read y; echo two-$y; exec sleep 3600"], tag="worker")
        assert (proc["state"], proc["tag"]) == ("running", "worker")
        pid = proc["pid"]
        seen = []
        # It reads a line once it said one, and another once it said err
        # (so its stdout and stderr come in this order).
        for ev in sandbox.processes.events(pid, timeout=60):
            seen.append((ev.type, ev.data.get("bytes")))
            if ev.type != "start" and ev.data["bytes"] in (b"one\n", b"err-hi\n"):
                assert sandbox.processes.stdin(pid, "hi\n") == {"written_bytes": 3, "eof": False}
            if ev.type == "stdout" and ev.data["bytes"].startswith(b"two"):
                break
        assert seen == [("start", None), ("stdout", b"one\n"), ("stderr", b"err-hi\n"), ("stdout", b"two-hi\n")]
        # From offset 4: only what followed "one\n", each with its offset.
        evs = []
        for ev in sandbox.processes.events(pid, offset=4, timeout=60):
            evs.append((ev.type, ev.data["offset"], ev.data["bytes"], ev.next))
            if len(evs) == 2:
                break
        assert evs == [("stderr", 4, b"err-hi\n", 11), ("stdout", 11, b"two-hi\n", 18)]
        assert [p["pid"] for p in sandbox.processes.list()] == [pid]
        with pytest.raises(APIError) as e:
            sandbox.processes.resize(pid, 10, 10)
        assert e.value.code == "session.no_terminal"
        sandbox.processes.signal(pid, "TERM")
        last = list(sandbox.processes.events(pid, offset=18, timeout=60))[-1]
        assert (last.type, last.data["state"]) == ("exit", "exited")
        sleeper = sandbox.processes.start(["sleep", "3600"])
        assert sandbox.processes.kill(sleeper["pid"])["status"] == "canceled"
    finally:
        sandbox.delete()
