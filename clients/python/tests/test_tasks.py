import hashlib
import time
import uuid

import pytest

from agent_runner_client import APIError, Client


def manifest(task_id, origin, arg="fast", run="r"):
    return f'''version: "1"
kind: Task
metadata: {{id: {task_id}, name: python task, labels: {{team: py, run: {run}}}}}
repository: {{url: "{origin}", branch: main}}
claude: {{prompt: "edit a.txt"}}
agent: {{command: ["/bin/sh", "agent.sh", "{arg}"]}}
'''


def test_task_submit_logs_status_artifacts(server, origin):
    c = Client(server)
    tid = "py-" + uuid.uuid4().hex[:8]
    accepted = c.submit_task(manifest(tid, origin))
    assert accepted == {"task_id": tid, "accepted": True}
    events = list(c.task_logs(tid, timeout=60))
    assert [e for e in events if e[0] != "completed"] == [("stdout", "working"), ("stderr", "done")]
    assert events[-1][0] == "completed" and events[-1][1]["state"] == "completed"
    st = c.task(tid)
    assert st["state"] == "completed" and st["name"] == "python task" and st["labels"]["team"] == "py"
    assert st["metadata"]["exit_code"] == 0
    arts = {a["name"]: a for a in c.task_artifacts(tid)}
    assert tid + ".patch" in arts
    body, digest = c.download_task_artifact(tid, tid + ".patch")
    assert b"+two" in body
    assert digest == hashlib.sha256(body).hexdigest() == arts[tid + ".patch"]["sha256"]


def test_task_cancel_destroy_and_list(server, origin):
    c = Client(server)
    run = uuid.uuid4().hex[:8]
    done, slow = "py-" + run + "-a", "py-" + run + "-b"
    c.submit_task(manifest(done, origin, run=run))
    assert c.wait_task(done, timeout=60)["state"] == "completed"
    c.submit_task(manifest(slow, origin, "slow", run=run))
    deadline = time.monotonic() + 60
    while c.task(slow)["state"] != "running":
        assert time.monotonic() < deadline, "the slow task never ran"
        time.sleep(0.05)
    assert c.cancel_task(slow)["task_id"] == slow
    assert c.wait_task(slow, timeout=60)["state"] == "cancelled"
    assert c.destroy_task(slow)["task_id"] == slow

    page = c.list_tasks(state=["completed", "cancelled"], labels={"run": run}, limit=1)
    assert page["total_count"] == 2 and len(page["tasks"]) == 1 and page["next_cursor"]
    ids = [t["task_id"] for t in c.iter_tasks(state=["completed", "cancelled"], labels={"run": run}, page_size=1)]
    assert ids == [slow, done]
    assert c.list_tasks(state="failed", labels={"run": run})["tasks"] == []


def test_task_errors(server, origin):
    c = Client(server)
    with pytest.raises(APIError) as e:
        c.task("py-does-not-exist")
    assert e.value.status == 404 and e.value.code == "job.not_found"
    with pytest.raises(APIError) as e:
        c.list_tasks(state="done")
    assert e.value.status == 422 and e.value.code == "validation.invalid_request"
    with pytest.raises(APIError) as e:
        c.list_tasks(limit=5000)
    assert e.value.status == 422 and e.value.code == "validation.invalid_request"
    with pytest.raises(APIError) as e:
        c.submit_task("kind: Task")
    assert e.value.status == 422
    with pytest.raises(APIError) as e:
        list(c.task_logs("py-does-not-exist"))
    assert e.value.status == 404 and e.value.code == "job.not_found"


def test_task_without_id(server, origin):
    """The spec's minimal form (no metadata.id) runs: the id minted at
    submit is the one the worker runs and the record keeps."""
    c = Client(server)
    doc = manifest("X", origin).replace("id: X, ", "")
    assert "id:" not in doc.split("metadata:")[1].split("\n")[0]
    accepted = c.submit_task(doc)
    tid = accepted["task_id"]
    assert accepted["accepted"] and tid.startswith("task-")
    st = c.wait_task(tid, timeout=60)
    assert st["state"] == "completed", st
    assert tid + ".patch" in {a["name"] for a in c.task_artifacts(tid)}
