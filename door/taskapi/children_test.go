package taskapi_test

import (
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agent-runner/agent-runner/door/taskapi"
	"github.com/agent-runner/agent-runner/task/taskstore"
)

// unixHTTP is Python's standard HTTP client over a Unix socket.
const unixHTTP = `import http.client, json, os, socket, time

class Unix(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost")
        self.path = path
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect(self.path)
`

// parentAgent runs inside the parent's sandbox and talks to the children
// socket with the standard library only, printing one line per attempt.
const parentAgent = unixHTTP + `
def call(method, url, body=None, token=None):
    c = Unix(os.environ["AGENT_RUNNER_SOCKET"])
    h = {"Authorization": "Bearer " + (token or os.environ["AGENT_TASK_TOKEN"])}
    if body:
        h["Content-Type"] = "application/yaml"
    c.request(method, url, body=body, headers=h)
    r = c.getresponse()
    return r.status, r.read().decode()

def child(id, extra="", url="@ORIGIN@"):
    return ('version: "1"\nkind: Task\nmetadata: {id: %s, name: child}\n'
            'repository: {url: "%s", branch: main}\nclaude: {prompt: "child work"}\n'
            'agent: {command: ["/bin/sh", "agent.sh", "beat"]}\n%s') % (id, url, extra)

print("bad-token", call("POST", "/v1/tasks", child("x1"), token="0" * 64)[0])
print("child-1", call("POST", "/v1/tasks", child("child-1"))[0])
print("child-2", call("POST", "/v1/tasks", child("child-2"))[0])
print("foreign-parent", call("POST", "/v1/tasks", child("x2", "parent_id: other"))[0])
print("foreign-repo", call("POST", "/v1/tasks", child("x3", url="/etc"))[0])
print("host-file-secret", call("POST", "/v1/tasks", child("x4", "secrets: [{name: K, source: file, key: /etc/shadow}]\n"))[0])
print("egress", call("POST", "/v1/tasks", child("x5", "vm: {network_mode: outbound, allowed_hosts: [api.example.com]}\n"))[0])
print("bigger", call("POST", "/v1/tasks", child("x6", "vm: {memory: 64G}\n"))[0])
print("other-task", call("GET", "/v1/tasks/other")[0])
print("own-child", call("GET", "/v1/tasks/child-1")[0])
print("listed", json.loads(call("GET", "/v1/tasks")[1])["total_count"])
`

// TestChildrenThroughTheSocket: a parent agent creates children through
// its socket, which refuses bad tokens, foreign parents and anything the
// parent itself was not given; max_concurrent 1 runs the children one
// after the other; the parent waits for them and aggregates their
// artifacts.
func TestChildrenThroughTheSocket(t *testing.T) {
	base, origin, store := setupWith(t, map[string]string{"parent.py": parentAgent}, func(s *taskstore.Store) {
		s.Lifecycle.ChildSocket = taskapi.ChildSocket(s)
	})
	post := func(doc string) {
		t.Helper()
		resp, err := http.Post(base+"/api/v1/tasks", "application/yaml", strings.NewReader(doc))
		if err != nil || resp.StatusCode != 202 {
			t.Fatalf("submit = %v %v", resp, err)
		}
	}
	post(manifest("other", origin, "fast"))
	waitState(t, base, "other", "completed")
	post(`version: "1"
kind: Task
metadata: {id: parent, name: parent}
repository: {url: "` + origin + `", branch: main}
claude: {prompt: "split the work"}
agent: {command: ["/usr/bin/python3", "parent.py"]}
vm: {memory: 512M, cpus: 1}
children: {max_concurrent: 1, wait_for_children: true, aggregate_artifacts: true}
`)
	st := waitState(t, base, "parent", "completed", "failed")
	stdout, _ := os.ReadFile(filepath.Join(store.Dir("parent"), "outbox", "progress", "stdout.log"))
	want := "bad-token 401\nchild-1 202\nchild-2 202\nforeign-parent 403\nforeign-repo 403\nhost-file-secret 403\negress 403\nbigger 403\nother-task 404\nown-child 200\nlisted 2\n"
	if string(stdout) != want {
		t.Fatalf("parent agent saw:\n%s\nwant:\n%s(state %v)", stdout, want, st["state"])
	}
	if st["state"] != "completed" {
		t.Fatalf("parent = %v", st)
	}
	type rec struct {
		State     string    `json:"state"`
		ParentID  string    `json:"parent_id"`
		StartedAt time.Time `json:"started_at"`
		EndedAt   time.Time `json:"ended_at"`
	}
	var c1, c2, p rec
	getJSON(t, base+"/api/v1/tasks/child-1", &c1)
	getJSON(t, base+"/api/v1/tasks/child-2", &c2)
	getJSON(t, base+"/api/v1/tasks/parent", &p)
	if c1.State != "completed" || c2.State != "completed" || c1.ParentID != "parent" || c2.ParentID != "parent" {
		t.Fatalf("children = %+v %+v", c1, c2)
	}
	if c2.StartedAt.Before(c1.EndedAt) {
		t.Errorf("max_concurrent 1: child-2 started %s before child-1 ended %s", c2.StartedAt, c1.EndedAt)
	}
	if p.EndedAt.Before(c2.EndedAt) {
		t.Errorf("wait_for_children: parent ended %s before child-2 %s", p.EndedAt, c2.EndedAt)
	}
	for _, id := range []string{"x1", "x2", "x3", "x4", "x5", "x6"} {
		if code := getJSON(t, base+"/api/v1/tasks/"+id, &map[string]any{}); code != 404 {
			t.Errorf("refused child %s exists (%d)", id, code)
		}
	}
	var arts struct {
		Artifacts []struct{ Name, SHA256 string }
	}
	getJSON(t, base+"/api/v1/tasks/parent/artifacts", &arts)
	names := map[string]bool{}
	for _, a := range arts.Artifacts {
		names[a.Name] = a.SHA256 != ""
	}
	for _, want := range []string{"children/child-1/child-1.patch", "children/child-2/child-2.patch", "children/child-2/metadata.json"} {
		if !names[want] {
			t.Errorf("aggregated artifacts lack %s: %v", want, names)
		}
	}
	var md struct {
		Children []struct {
			TaskID string `json:"task_id"`
			State  string `json:"state"`
		}
	}
	b, _ := os.ReadFile(filepath.Join(store.Dir("parent"), "outbox", "artifacts", "metadata.json"))
	json.Unmarshal(b, &md)
	if len(md.Children) != 2 || md.Children[0].State != "completed" {
		t.Errorf("parent metadata children = %+v", md.Children)
	}
}

// spawner submits two slow children (the second waits for a slot) and
// then sleeps, so the test can cancel the parent mid-run.
const spawner = unixHTTP + `
for id in ("slow-1", "slow-2"):
    c = Unix(os.environ["AGENT_RUNNER_SOCKET"])
    c.request("POST", "/v1/tasks", body='version: "1"\nkind: Task\nmetadata: {id: %s, name: slow}\nrepository: {url: "@ORIGIN@", branch: main}\nclaude: {prompt: wait}\nagent: {command: ["/bin/sh", "agent.sh", "slow"]}\n' % id,
              headers={"Authorization": "Bearer " + os.environ["AGENT_TASK_TOKEN"]})
    print(id, c.getresponse().status, flush=True)
time.sleep(60)
`

// TestCancelParentCancelsChildren: cancelling a parent cancels its running
// child and the one still waiting for a max_concurrent slot.
func TestCancelParentCancelsChildren(t *testing.T) {
	base, origin, _ := setupWith(t, map[string]string{"spawner.py": spawner}, func(s *taskstore.Store) {
		s.Lifecycle.ChildSocket = taskapi.ChildSocket(s)
	})
	resp, err := http.Post(base+"/api/v1/tasks", "application/yaml", strings.NewReader(`version: "1"
kind: Task
metadata: {id: boss, name: boss}
repository: {url: "`+origin+`", branch: main}
claude: {prompt: "spawn"}
agent: {command: ["/usr/bin/python3", "spawner.py"]}
children: {max_concurrent: 1}
`))
	if err != nil || resp.StatusCode != 202 {
		t.Fatalf("submit = %v %v", resp, err)
	}
	waitState(t, base, "slow-1", "running")
	if st := waitState(t, base, "slow-2", "pending"); st["parent_id"] != "boss" {
		t.Errorf("slow-2 = %v", st)
	}
	req, _ := http.NewRequest(http.MethodDelete, base+"/api/v1/tasks/boss", nil)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 202 {
		t.Fatalf("cancel = %v %v", resp, err)
	}
	for _, id := range []string{"boss", "slow-1", "slow-2"} {
		waitState(t, base, id, "cancelled")
	}
}

// TestCleanStaleSockets removes a dead server's socket directory and
// keeps a live one.
func TestCleanStaleSockets(t *testing.T) {
	open := taskapi.ChildSocket(nil)
	live, stop, err := open("p", "hash")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	dead, err := os.MkdirTemp("", "agent-runner-children-")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", filepath.Join(dead, taskapi.ChildSocketName))
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close() // the socket file stays, nobody listens: a killed server
	if removed := taskapi.CleanStaleSockets(); slices.Contains(removed, dead) {
		t.Error("a directory made just now was removed")
	}
	old := time.Now().Add(-time.Hour)
	os.Chtimes(dead, old, old)
	os.Chtimes(filepath.Dir(live), old, old)
	removed := taskapi.CleanStaleSockets()
	if !slices.Contains(removed, dead) || slices.Contains(removed, filepath.Dir(live)) {
		t.Errorf("removed %v (dead %s, live %s)", removed, dead, live)
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("live socket removed: %v", err)
	}
}
