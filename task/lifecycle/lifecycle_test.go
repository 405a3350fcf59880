package lifecycle_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agent-runner/agent-runner/backend/linuxsandbox"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/secretfile"
	"github.com/agent-runner/agent-runner/task/lifecycle"
	"github.com/agent-runner/agent-runner/task/manifest"
	"github.com/agent-runner/agent-runner/task/stage"
	"github.com/agent-runner/agent-runner/task/state"
	"github.com/agent-runner/agent-runner/task/tasktest"
)

func TestMain(m *testing.M) {
	linuxsandbox.MaybeInit()
	os.Exit(m.Run())
}

// defaultVM is the vm block submit adds unless extra has its own.
func defaultVM(extra string) string {
	if strings.Contains(extra, "vm:") {
		return ""
	}
	return "vm: {memory: 512M, cpus: 1}\n"
}

// submit creates a task directory in pending with a fake agent script.
func submit(t testing.TB, script, extra string) (string, *manifest.Task, []byte) {
	t.Helper()
	origin := tasktest.Origin(t, map[string]string{"a.txt": "one\n"})
	base := filepath.Dir(origin)
	doc := []byte(`version: "1"
kind: Task
metadata: {id: task-lc, name: LC}
repository: {url: "` + origin + `", branch: main}
claude: {prompt: "work"}
agent: {command: ["/bin/sh"]}
` + defaultVM(extra) + extra)
	tk, err := manifest.Parse(doc)
	if err != nil {
		t.Fatal(err)
	}
	tk.Agent.Command = []string{"/bin/sh", "-c", script}
	dir := filepath.Join(base, "tasks", tk.Metadata.ID)
	if _, err := state.Create(dir, tk.Metadata.ID, ""); err != nil {
		t.Fatal(err)
	}
	return dir, tk, doc
}

var quick = stage.Backoff{Base: time.Millisecond, Max: time.Millisecond, Attempts: 1}

// secretsFile registers API_KEY (env TEST_API_KEY) and GH_TOKEN (a file
// holding "file-secret-456").
func secretsFile(t *testing.T) *secretfile.File {
	t.Helper()
	dir := t.TempDir()
	token := filepath.Join(dir, "gh-token")
	os.WriteFile(token, []byte("file-secret-456\n"), 0o600)
	path := filepath.Join(dir, "secrets.yaml")
	os.WriteFile(path, []byte("secrets:\n  API_KEY: {env: TEST_API_KEY}\n  GH_TOKEN: {file: "+token+"}\n"), 0o600)
	f, err := secretfile.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestCompletedTask(t *testing.T) {
	dir, tk, doc := submit(t, `echo changed > a.txt; mkdir -p reports; echo '{"ok":true}' > reports/r.json; echo "token=$AGENT_TASK_TOKEN key=$API_KEY gh=$GH_TOKEN"
printf %s "$API_KEY $GH_TOKEN" > .git/seen.txt`,
		"secrets: [{name: API_KEY, source: env, key: TEST_API_KEY}, {name: GH_TOKEN}]\nlifecycle: {artifact_patterns: [\"reports/*.json\"]}\n")
	md, err := lifecycle.Run(context.Background(), dir, tk, doc, lifecycle.Config{
		Backend: tasktest.Backend(t), CloneBackoff: &quick, Secrets: secretsFile(t),
		Env: func(k string) string { return map[string]string{"TEST_API_KEY": "secret-value-123"}[k] },
	})
	if err != nil || md.State != state.Completed {
		t.Fatalf("task = %+v %v", md, err)
	}
	if b := tasktest.Backend(t); slices.Contains(b.Capabilities().Enforces, job.LimitMemory) && (md.PeakMemoryBytes == 0 || md.CPUSeconds == 0) {
		t.Errorf("no run totals from the cgroups: %+v", md)
	}
	if len(md.TokenHash) != 64 {
		t.Errorf("token hash = %q", md.TokenHash)
	}
	names := map[string]bool{}
	for _, a := range md.Artifacts {
		names[a.Name] = a.SHA256 != ""
	}
	if !names["task-lc.patch"] || !names["task-lc-untracked.txt"] || !names["files/reports/r.json"] {
		t.Errorf("artifacts = %+v", md.Artifacts)
	}
	// No record or log holds the secret or the plaintext token.
	stdout, _ := os.ReadFile(filepath.Join(dir, "outbox", "progress", "stdout.log"))
	if !strings.Contains(string(stdout), "token=[REDACTED] key=[REDACTED] gh=[REDACTED]") {
		t.Errorf("stdout.log = %q", stdout)
	}
	// Both registered secrets reached the agent.
	if seen, _ := os.ReadFile(filepath.Join(dir, "inbox", ".git", "seen.txt")); string(seen) != "secret-value-123 file-secret-456" {
		t.Errorf("the agent saw %q, want both secret values", seen)
	}
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() || strings.Contains(p, "/inbox/") {
			return nil
		}
		b, _ := os.ReadFile(p)
		if strings.Contains(string(b), "secret-value-123") || strings.Contains(string(b), "file-secret-456") {
			t.Errorf("%s contains a secret", p)
		}
		return nil
	})
	rec, _ := state.Open(dir)
	if rec.Current().State != state.Completed {
		t.Errorf("state.json = %+v", rec.Current())
	}
}

func TestFailurePreserveAndDestroy(t *testing.T) {
	for action, want := range map[string]state.State{"preserve": state.FailedPreserved, "destroy": state.Failed} {
		dir, tk, doc := submit(t, `echo partial > a.txt; exit 3`, "lifecycle: {failure_action: "+action+"}\n")
		md, err := lifecycle.Run(context.Background(), dir, tk, doc, lifecycle.Config{Backend: tasktest.Backend(t), CloneBackoff: &quick})
		if err != nil || md.State != want || md.ExitCode == nil || *md.ExitCode != 3 {
			t.Errorf("%s: %+v %v", action, md, err)
		}
		_, inboxErr := os.Stat(filepath.Join(dir, "inbox", "a.txt"))
		if (action == "preserve") != (inboxErr == nil) {
			t.Errorf("%s: workspace kept = %v", action, inboxErr == nil)
		}
		if _, err := os.Stat(filepath.Join(dir, "outbox", "artifacts", "task-lc.patch")); err != nil {
			t.Errorf("%s: the partial patch was not collected", action)
		}
	}
}

// TestUnregisteredSecretFailsBeforeStaging: a task recovered after a
// restart meets the current secrets file; a secret it does not register
// (or no file at all) fails the task before anything is cloned or run.
func TestUnregisteredSecretFailsBeforeStaging(t *testing.T) {
	for name, cfg := range map[string]lifecycle.Config{
		"no secrets file": {},
		"not registered":  {Secrets: secretsFile(t)},
	} {
		dir, tk, doc := submit(t, `touch ran`, "secrets: [{name: HOME, source: env, key: HOME}]\n")
		cfg.Backend, cfg.CloneBackoff = tasktest.Backend(t), &quick
		md, _ := lifecycle.Run(context.Background(), dir, tk, doc, cfg)
		if md.State != state.Failed || md.Error == nil || md.Error.Code != job.CodeForbidden {
			t.Errorf("%s: task = %s %+v, want failed %s", name, md.State, md.Error, job.CodeForbidden)
		}
		if _, err := os.Stat(filepath.Join(dir, "inbox")); !os.IsNotExist(err) {
			t.Errorf("%s: the repository was staged", name)
		}
	}
}

// TestFailedAgentSaysWhy: a failed task's error carries the agent's last
// error line (scrubbed), not only "agent ended: exit 1"; the old status
// left the reason in the log.
func TestFailedAgentSaysWhy(t *testing.T) {
	dir, tk, doc := submit(t, `echo "warming up" >&2; echo "Error: Input must be provided (key $API_KEY)" >&2; echo done >&2; exit 1`,
		"secrets: [{name: API_KEY}]\n")
	md, err := lifecycle.Run(context.Background(), dir, tk, doc, lifecycle.Config{
		Backend: tasktest.Backend(t), CloneBackoff: &quick, Secrets: secretsFile(t),
		Env: func(k string) string { return map[string]string{"TEST_API_KEY": "secret-value-123"}[k] },
	})
	if err != nil || md.State != state.Failed {
		t.Fatalf("task = %+v %v", md, err)
	}
	want := "agent ended: exit 1: Error: Input must be provided (key [REDACTED])"
	if md.Error == nil || md.Error.Message != want {
		t.Errorf("error = %+v, want message %q", md.Error, want)
	}
	rec, _ := state.Open(dir)
	if cur := rec.Current(); cur.Error == nil || cur.Error.Message != want || cur.Reason != want {
		t.Errorf("state.json = %+v, want error and reason %q", cur, want)
	}
}

// TestShortSecretFailsBeforeStaging: a secret value too short to scrub
// fails the task before anything is cloned, naming the secret.
func TestShortSecretFailsBeforeStaging(t *testing.T) {
	dir, tk, doc := submit(t, `touch ran`, "secrets: [{name: API_KEY}]\n")
	md, _ := lifecycle.Run(context.Background(), dir, tk, doc, lifecycle.Config{
		Backend: tasktest.Backend(t), CloneBackoff: &quick, Secrets: secretsFile(t),
		Env: func(string) string { return "1" },
	})
	if md.State != state.Failed || md.Error == nil || md.Error.Code != job.CodeInvalidRequest || !strings.Contains(md.Error.Message, "API_KEY") {
		t.Errorf("task = %s %+v, want failed %s naming API_KEY", md.State, md.Error, job.CodeInvalidRequest)
	}
	if _, err := os.Stat(filepath.Join(dir, "inbox")); !os.IsNotExist(err) {
		t.Error("the repository was staged")
	}
}

func TestCancelMidRun(t *testing.T) {
	dir, tk, doc := submit(t, `echo partial > a.txt; while true; do echo working; sleep 0.1; done`, "")
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		// Cancel once the agent is looping (after its edit), however slow
		// the machine is.
		defer cancel()
		for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if b, _ := os.ReadFile(filepath.Join(dir, "outbox", "progress", "stdout.log")); strings.Contains(string(b), "working") {
				return
			}
		}
	}()
	md, _ := lifecycle.Run(ctx, dir, tk, doc, lifecycle.Config{Backend: tasktest.Backend(t), CloneBackoff: &quick})
	if md.State != state.Cancelled || md.Error == nil || md.Error.Code != job.CodeRunCanceled {
		t.Errorf("cancelled task = %+v", md)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "outbox", "artifacts", "metadata.json"))
	var got lifecycle.Metadata
	if json.Unmarshal(b, &got) != nil || got.State != state.Cancelled {
		t.Errorf("metadata.json = %s", b)
	}
	// What the agent did before the cancel is collected.
	if patch, _ := os.ReadFile(filepath.Join(dir, "outbox", "artifacts", "task-lc.patch")); !strings.Contains(string(patch), "+partial") {
		t.Errorf("cancelled task's patch = %q", patch)
	}
}

// TestArtifactPatternsStayInTheWorkspace: the agent links a directory and
// a file out of the workspace under names the patterns match; nothing
// from outside is collected, while "**" still reaches nested files.
func TestArtifactPatternsStayInTheWorkspace(t *testing.T) {
	dir, tk, doc := submit(t, `mkdir -p reports coverage/a/b && ln -s /etc reports/etc && ln -s /etc/passwd reports/passwd.json &&
echo '{}' > reports/ok.json && echo deep > coverage/a/b/c.txt && ln -s /etc coverage/a/etc`,
		"lifecycle: {artifact_patterns: [\"reports/*\", \"reports/*/*\", \"coverage/**/*\", \"**/passwd\"]}\n")
	md, err := lifecycle.Run(context.Background(), dir, tk, doc, lifecycle.Config{Backend: tasktest.Backend(t), CloneBackoff: &quick})
	if err != nil || md.State != state.Completed {
		t.Fatalf("task = %+v %v", md, err)
	}
	var names []string
	for _, a := range md.Artifacts {
		if strings.HasPrefix(a.Name, "files/") {
			names = append(names, a.Name)
		}
	}
	if got := strings.Join(names, " "); got != "files/coverage/a/b/c.txt files/reports/ok.json" {
		t.Errorf("collected %q", got)
	}
	filepath.Walk(filepath.Join(dir, "outbox"), func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			if b, _ := os.ReadFile(p); strings.Contains(string(b), "root:x:0:0") {
				t.Errorf("%s holds the host's /etc/passwd", p)
			}
		}
		return nil
	})
}

// TestDiskQuotaIsEnforced: vm.disk 64M makes the workspace a 64 MiB
// filesystem; an agent writing 100 MiB gets ENOSPC, and destroying the
// failed task's workspace unmounts and removes the image.
func TestDiskQuotaIsEnforced(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("vm.disk quotas need root for the loop mount; not enforced here (recorded in metadata)")
	}
	dir, tk, doc := submit(t, `dd if=/dev/zero of=big bs=1M count=100 2>&1; ls -l big; exit 9`,
		"vm: {memory: 512M, cpus: 1, disk: 64M}\nlifecycle: {failure_action: preserve}\n")
	t.Cleanup(func() { stage.RemoveWorkspace(stage.Layout{Dir: dir}) })
	md, err := lifecycle.Run(context.Background(), dir, tk, doc, lifecycle.Config{Backend: tasktest.Backend(t), CloneBackoff: &quick})
	if err != nil {
		t.Fatal(err)
	}
	if md.DiskNote != "" && strings.Contains(md.DiskNote, "loop mount") {
		t.Skipf("no loop devices on this host: %s", md.DiskNote)
	}
	if !slices.Contains(md.Enforced, lifecycle.LimitDisk) || md.State != state.FailedPreserved {
		t.Fatalf("metadata = %+v", md)
	}
	stdout, _ := os.ReadFile(filepath.Join(dir, "outbox", "progress", "stdout.log"))
	if !strings.Contains(string(stdout), "No space left on device") {
		t.Errorf("agent output:\n%s", stdout)
	}
	l := stage.Layout{Dir: dir}
	if fi, err := os.Stat(filepath.Join(l.Inbox(), "big")); err != nil || fi.Size() >= 64<<20 {
		t.Errorf("big file: %v %v", fi, err)
	}
	if !stage.Mounted(l) {
		t.Fatal("the preserved workspace is not mounted")
	}
	if err := stage.RemoveWorkspace(l); err != nil {
		t.Fatal(err)
	}
	if stage.Mounted(l) {
		t.Error("workspace still mounted after removal")
	}
	for _, p := range []string{l.Inbox(), l.DiskImage(), l.Base()} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s survived", p)
		}
	}
}

// TestDiskQuotaWithFailureDestroy: the destroy path unmounts too.
func TestDiskQuotaWithFailureDestroy(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("vm.disk quotas need root for the loop mount")
	}
	dir, tk, doc := submit(t, `exit 1`, "vm: {memory: 512M, cpus: 1, disk: 32M}\n")
	t.Cleanup(func() { stage.RemoveWorkspace(stage.Layout{Dir: dir}) })
	md, err := lifecycle.Run(context.Background(), dir, tk, doc, lifecycle.Config{Backend: tasktest.Backend(t), CloneBackoff: &quick})
	if err != nil || md.State != state.Failed {
		t.Fatalf("task = %+v %v", md, err)
	}
	l := stage.Layout{Dir: dir}
	if stage.Mounted(l) {
		t.Error("failed task's workspace still mounted")
	}
	if _, err := os.Stat(l.DiskImage()); !os.IsNotExist(err) {
		t.Error("disk image survived")
	}
}

// TestFailedStagingLeavesNoMount: a clone that fails after the quota was
// mounted does not leave the loop mount behind.
func TestFailedStagingLeavesNoMount(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("vm.disk quotas need root for the loop mount")
	}
	dir, tk, doc := submit(t, `true`, "vm: {memory: 512M, cpus: 1, disk: 32M}\n")
	t.Cleanup(func() { stage.RemoveWorkspace(stage.Layout{Dir: dir}) })
	tk.Repository.Branch = "no-such-branch"
	md, err := lifecycle.Run(context.Background(), dir, tk, doc, lifecycle.Config{Backend: tasktest.Backend(t), CloneBackoff: &quick})
	if err != nil || md.State != state.Failed {
		t.Fatalf("task = %+v %v", md, err)
	}
	if l := (stage.Layout{Dir: dir}); stage.Mounted(l) {
		t.Error("loop mount left behind by a failed staging")
	}
}

// TestMetadataBeforeTheTerminalState: whoever sees a task terminal (a
// poll, the stream, a remote mirror) finds its metadata.json; it used to
// be written after the transition.
func TestMetadataBeforeTheTerminalState(t *testing.T) {
	for _, script := range []string{`echo done > a.txt`, `exit 3`} {
		dir, tk, doc := submit(t, script, "")
		var missing []string
		observe := func(_ state.State, rec state.Record) {
			if !rec.State.Terminal() {
				return
			}
			if _, err := os.Stat(filepath.Join(dir, "outbox", "artifacts", "metadata.json")); err != nil {
				missing = append(missing, string(rec.State))
			}
		}
		md, err := lifecycle.Run(context.Background(), dir, tk, doc, lifecycle.Config{Backend: tasktest.Backend(t), CloneBackoff: &quick, Observer: observe})
		if err != nil || !md.State.Terminal() {
			t.Fatalf("%q: %+v, %v", script, md, err)
		}
		if len(missing) > 0 {
			t.Errorf("%q: terminal state %v was visible before metadata.json", script, missing)
		}
	}
}
