import hashlib
import json
import subprocess

import pytest

from agent_runner_client import APIError, Client, CommandRunner


def test_completed_with_byte_exact_stdout(server, workspace):
    runner = CommandRunner(client=Client(server))
    res = runner.run(["python3", "-c", "import sys; sys.stdout.buffer.write(b'caf\\xc3\\xa9 \\xff\\xfe\\x00 end\\n')"], cwd=workspace, timeout=30)
    assert res.returncode == 0
    assert res.stdout == b"caf\xc3\xa9 \xff\xfe\x00 end\n"
    assert res.stderr == b""


def test_failed_command_keeps_exit_code_and_stderr(server, workspace):
    runner = CommandRunner(client=Client(server))
    res = runner.run(["python3", "-c", "import sys; print('boom', file=sys.stderr); sys.exit(3)"], cwd=workspace, timeout=30)
    assert res.returncode == 3
    assert res.stderr == b"boom\n"


def test_timeout_raises_timeout_expired(server, workspace):
    runner = CommandRunner(client=Client(server))
    with pytest.raises(subprocess.TimeoutExpired):
        runner.run(["sleep", "30"], cwd=workspace, timeout=0.5)


def test_policy_denied_is_nonzero_with_stable_error(server, workspace):
    runner = CommandRunner(client=Client(server), allowed_commands=["sh"])
    res = runner.run(["sh", "-c", "cat input.txt"], cwd=workspace, timeout=30)
    assert res.returncode != 0
    err = json.loads(res.stderr)
    assert err["status"] == "policy_denied"
    assert err["error"]["code"] == "policy.shell_denied"


def test_env_allowlist_and_cwd_snapshot(server, workspace):
    runner = CommandRunner(client=Client(server))
    res = runner.run(["python3", "-c", "import os; print(os.environ['VERIFY_MODE'], open('input.txt').read().strip())"], cwd=workspace, timeout=30, env={"VERIFY_MODE": "strict"})
    assert res.returncode == 0
    assert res.stdout == b"strict hello from the workspace\n"


def test_shell_string_is_refused_before_submitting(server, workspace):
    runner = CommandRunner(client=Client(server))
    with pytest.raises(ValueError):
        runner.run("cat input.txt", cwd=workspace, timeout=30)


def test_client_submit_status_artifacts_download(server, workspace):
    c = Client(server)
    req = {
        "trace": {"trace_id": "tr_py", "gateway_request_id": "gw_1", "custom": {"k": [1, 2]}},
        "workspace": {"path": workspace},
        "command": {"argv": ["python3", "-c", "open('report.txt','w').write('report body')"]},
        "policy": {"allowed_commands": ["python3"], "artifact_globs": ["report.txt"]},
    }
    accepted = c.submit(req)
    assert accepted["status"] == "queued" and accepted["job_id"].startswith("job_")
    res = c.wait(accepted["job_id"], timeout=60)
    assert res["status"] == "completed"
    assert res["trace"] == req["trace"]
    arts = c.artifacts(accepted["job_id"])
    assert [a["path"] for a in arts] == ["report.txt"]
    body, digest = c.download(accepted["job_id"], "report.txt")
    assert body == b"report body"
    assert digest == hashlib.sha256(body).hexdigest() == arts[0]["sha256"]


def test_cancel_and_errors(server, workspace):
    c = Client(server)
    job = c.submit({"workspace": {"path": workspace}, "command": {"argv": ["sleep", "30"]}, "policy": {"allowed_commands": ["sleep"]}})
    res = c.cancel(job["job_id"])
    assert res["status"] in ("canceled", "running", "queued")
    assert c.wait(job["job_id"], timeout=30)["status"] == "canceled"
    with pytest.raises(APIError) as e:
        c.status("job_does_not_exist")
    assert e.value.status == 404 and e.value.code == "job.not_found"
    with pytest.raises(APIError) as e:
        c.submit({"command": {"argv": []}})
    assert e.value.status == 422 and e.value.code.startswith("validation.")
