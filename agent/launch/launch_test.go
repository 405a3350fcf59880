package launch

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/agent/audit"

	_ "github.com/agent-runner/agent-runner/backend/localprocess"
)

var update = flag.Bool("update", false, "rewrite golden files")

const fixtures = "../testdata/agent-runtime"

// fixtureCopy copies the seed fixtures into a temp dir, adds the sample
// crate (a git repository with target/), and chdirs there: fixture paths
// are relative to the process working directory.
func fixtureCopy(t *testing.T) string {
	t.Helper()
	src, err := filepath.Abs(fixtures)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(src); err != nil {
		t.Fatalf("fixtures not found at %s: %v", src, err)
	}
	dst := t.TempDir()
	if out, err := exec.Command("cp", "-a", src+"/.", dst).CombinedOutput(); err != nil {
		t.Fatalf("copy fixtures: %v %s", err, out)
	}
	crate := filepath.Join(dst, "testdata", "sample-crate")
	if err := os.MkdirAll(filepath.Join(crate, "target"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(crate, "Cargo.toml"), []byte("[package]\nname = \"sample\"\n"), 0o644)
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "Cargo.toml"}, {"-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = crate
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s (git is needed: apt-get install git)", args, err, out)
		}
	}
	t.Chdir(dst)
	return dst
}

func fixedOptions(dir string) Options {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	return Options{
		Backend: "local_process", // named explicitly: linux_sandbox is not linked in
		RunsDir: filepath.Join(dir, "runs"),
		Now:     func() time.Time { return t0 },
		NewID:   func() string { return "00000000-0000-0000-0000-000000000001" },
	}
}

type stepShape struct {
	Tool, Code, JobStatus string
	Allowed, OK           bool
}

// The seed's fixture table: five tasks against two manifests.
func TestFixtureTasks(t *testing.T) {
	tests := []struct {
		manifest, task string
		want           []stepShape
		check          func(t *testing.T, auditText string)
	}{
		{"agents/log-watcher.yaml", "tasks/log-watcher.json", []stepShape{
			{Tool: "list_logs", Allowed: true, OK: true},
			{Tool: "tail_log", Allowed: true, OK: true},
			{Tool: "grep_log", Allowed: true, OK: true},
		}, func(t *testing.T, a string) {
			if !strings.Contains(a, `"text":"2025-04-01T10:00:01Z ERROR connection refused to upstream"`) {
				t.Errorf("grep_log result lacks the ERROR line:\n%s", a)
			}
		}},
		{"agents/log-watcher.yaml", "tasks/log-watcher-denied.json", []stepShape{
			{Tool: "read_log", Code: "validation.path_escape"},
		}, nil},
		{"agents/tester.yaml", "tasks/tester-ok.json", []stepShape{
			{Tool: "run_tests", Allowed: true, OK: true, JobStatus: "completed"},
		}, nil},
		{"agents/tester.yaml", "tasks/tester-deny-cmd.json", []stepShape{
			{Tool: "run_tests", Code: "policy.command_denied"},
		}, nil},
		{"agents/tester.yaml", "tasks/tester-git.json", []stepShape{
			{Tool: "git_status", Allowed: true, OK: true, JobStatus: "completed"},
		}, func(t *testing.T, a string) {
			if !strings.Contains(a, `## main`) {
				t.Errorf("git_status result lacks the branch line:\n%s", a)
			}
		}},
		// The nested manifests are the same agents.
		{"agents/log-watcher/manifest.yaml", "tasks/log-watcher.json", []stepShape{
			{Tool: "list_logs", Allowed: true, OK: true}, {Tool: "tail_log", Allowed: true, OK: true}, {Tool: "grep_log", Allowed: true, OK: true},
		}, nil},
		{"agents/tester/manifest.yaml", "tasks/tester-deny-cmd.json", []stepShape{
			{Tool: "run_tests", Code: "policy.command_denied"},
		}, nil},
	}
	dir := fixtureCopy(t)
	for _, tt := range tests {
		t.Run(tt.manifest+"+"+tt.task, func(t *testing.T) {
			task, err := LoadTask(tt.task)
			if err != nil {
				t.Fatal(err)
			}
			sum, err := Scripted(context.Background(), tt.manifest, task, Options{Backend: "local_process", RunsDir: filepath.Join(dir, "runs")})
			if err != nil {
				t.Fatal(err)
			}
			var got []stepShape
			for _, s := range sum.Steps {
				got = append(got, stepShape{Tool: s.Tool, Code: s.Code, JobStatus: s.JobStatus, Allowed: s.Allowed, OK: s.OK})
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("steps (-want +got):\n%s", diff)
			}
			if sum.ExitReason != ExitCompleted || sum.ToolCallsUsed != int64(len(tt.want)) {
				t.Errorf("exit %q after %d calls, want completed after %d", sum.ExitReason, sum.ToolCallsUsed, len(tt.want))
			}
			for _, f := range []string{"audit.jsonl", "summary.json", "manifest.yaml"} {
				if _, err := os.Stat(filepath.Join(sum.RunDir, f)); err != nil {
					t.Errorf("run dir lacks %s: %v", f, err)
				}
			}
			copied, _ := os.ReadFile(filepath.Join(sum.RunDir, "manifest.yaml"))
			orig, _ := os.ReadFile(tt.manifest)
			if string(copied) != string(orig) {
				t.Error("manifest copy differs from the manifest used")
			}
			rep, err := audit.VerifyPath(sum.RunDir)
			if err != nil || !rep.OK || !rep.Complete || rep.HeadSHA256 != sum.AuditHeadSHA256 {
				t.Errorf("audit verify = %+v, %v; want ok, complete, head %s", rep, err, sum.AuditHeadSHA256)
			}
			if tt.check != nil {
				b, _ := os.ReadFile(filepath.Join(sum.RunDir, "audit.jsonl"))
				tt.check(t, string(b))
			}
		})
	}
}

// Seed test runner_writes_audit_and_summary, plus the event order.
func TestRunnerWritesAuditAndSummary(t *testing.T) {
	dir := fixtureCopy(t)
	task, _ := LoadTask("tasks/log-watcher.json")
	sum, err := Scripted(context.Background(), "agents/log-watcher.yaml", task, Options{Backend: "local_process", RunsDir: filepath.Join(dir, "runs")})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(sum.RunDir, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var disk Summary
	if err := json.Unmarshal(b, &disk); err != nil {
		t.Fatal(err)
	}
	if disk.RunID != sum.RunID || disk.Allowed != 3 || disk.Denied != 0 || disk.ExitReason != ExitCompleted {
		t.Errorf("summary.json = %+v", disk)
	}
}

var (
	reTS    = regexp.MustCompile(`"ts":"[^"]*"`)
	rePrev  = regexp.MustCompile(`"prev_sha256":"[0-9a-f]{64}"`)
	reSHA   = regexp.MustCompile(`"sha256":"[0-9a-f]{64}"`)
	reJobID = regexp.MustCompile(`job_[0-9a-f-]{36}`)
)

// normalize removes what differs between machines and runs: times, the
// temp dir, hashes of host binaries and the chain hashes that depend on
// them (the chain itself is checked by audit.Verify).
func normalize(b []byte, dir string) string {
	s := strings.ReplaceAll(string(b), dir, "$DIR")
	s = reTS.ReplaceAllString(s, `"ts":"$$TS"`)
	s = rePrev.ReplaceAllString(s, `"prev_sha256":"$$PREV"`)
	s = reSHA.ReplaceAllString(s, `"sha256":"$$SHA256"`)
	return reJobID.ReplaceAllString(s, "job_$$ID")
}

// Golden audit: fixed manifest + task -> stable event order and denial shapes.
func TestGoldenAudit(t *testing.T) {
	cases := []struct{ name, manifest, task string }{
		{"log-watcher", "agents/log-watcher.yaml", "tasks/log-watcher.json"},
		{"log-watcher-denied", "agents/log-watcher.yaml", "tasks/log-watcher-denied.json"},
		{"tester-deny-cmd", "agents/tester.yaml", "tasks/tester-deny-cmd.json"},
		{"limit", "agents/log-watcher.yaml", "LIMIT"},
	}
	golden, _ := filepath.Abs("testdata/golden")
	dir := fixtureCopy(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var task *Task
			var err error
			if c.task == "LIMIT" {
				// 22 calls against max_tool_calls 20: two denials, then the limit.
				task = &Task{}
				for i := 0; i < 22; i++ {
					tool := "tail_log"
					if i%10 == 9 {
						tool = "run_tests"
					}
					task.Steps = append(task.Steps, Step{Tool: tool, Args: json.RawMessage(`{"path":"testdata/logs/app.log","lines":1}`)})
				}
			} else if task, err = LoadTask(c.task); err != nil {
				t.Fatal(err)
			}
			o := fixedOptions(dir)
			o.RunsDir = filepath.Join(dir, "golden-runs", c.name)
			sum, err := Scripted(context.Background(), c.manifest, task, o)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := os.ReadFile(filepath.Join(sum.RunDir, "audit.jsonl"))
			got := normalize(b, dir)
			path := filepath.Join(golden, c.name+".audit.jsonl")
			if *update {
				os.MkdirAll(golden, 0o755)
				os.WriteFile(path, []byte(got), 0o644)
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create)", err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("audit (-want +got):\n%s", diff)
			}
		})
	}
}

// max_runtime_seconds is a real deadline: a job that would sleep 30 s is
// cut at the run's deadline and later steps do not run.
func TestMaxRuntimeIsADeadline(t *testing.T) {
	dir := fixtureCopy(t)
	os.WriteFile("short.yaml", []byte("name: s\ncapabilities: {tools: [run_tests, tail_log], filesystem: {read: [testdata/sample-crate]}, commands: {allow: [/bin/sleep]}}\nlimits: {max_runtime_seconds: 1}\n"), 0o644)
	task := &Task{Steps: []Step{
		{Tool: "run_tests", Args: json.RawMessage(`{"command":"/bin/sleep","working_directory":"testdata/sample-crate","args":["30"]}`)},
		{Tool: "tail_log", Args: json.RawMessage(`{"path":"testdata/sample-crate/Cargo.toml"}`)},
	}}
	sum, err := Scripted(context.Background(), "short.yaml", task, Options{Backend: "local_process", RunsDir: filepath.Join(dir, "runs")})
	if err != nil {
		t.Fatal(err)
	}
	if sum.ExitReason != ExitMaxRuntime || sum.ToolCallsUsed != 1 {
		t.Errorf("exit %q after %d calls, want max_runtime after 1", sum.ExitReason, sum.ToolCallsUsed)
	}
	if st := sum.Steps[0].JobStatus; st != "timed_out" && st != "canceled" {
		t.Errorf("sleep job status %q, want timed_out or canceled", st)
	}
}

func TestCanceledParentStopsRun(t *testing.T) {
	dir := fixtureCopy(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	task, _ := LoadTask("tasks/log-watcher.json")
	sum, err := Scripted(ctx, "agents/log-watcher.yaml", task, Options{Backend: "local_process", RunsDir: filepath.Join(dir, "runs")})
	if err != nil {
		t.Fatal(err)
	}
	if sum.ExitReason != ExitCanceled || sum.ToolCallsUsed != 0 {
		t.Errorf("exit %q after %d calls, want canceled after 0", sum.ExitReason, sum.ToolCallsUsed)
	}
}

func TestLoadTaskYAML(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "t.yaml")
	os.WriteFile(p, []byte("description: d\nsteps:\n  - tool: tail_log\n    args: {path: a.log, lines: 3}\n  - tool: list_logs\n"), 0o644)
	task, err := LoadTask(p)
	if err != nil {
		t.Fatal(err)
	}
	got := []string{string(task.Steps[0].Args), string(task.Steps[1].Args)}
	want := []string{`{"lines":3,"path":"a.log"}`, `{}`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("args (-want +got):\n%s", diff)
	}
}

func TestVerifyRunCatchesCutTail(t *testing.T) {
	dir := fixtureCopy(t)
	task, _ := LoadTask("tasks/log-watcher.json")
	sum, err := Scripted(context.Background(), "agents/log-watcher.yaml", task, Options{Backend: "local_process", RunsDir: filepath.Join(dir, "runs")})
	if err != nil {
		t.Fatal(err)
	}
	if rep, err := VerifyRun(sum.RunDir); err != nil || !rep.OK {
		t.Fatalf("intact run: %+v %v", rep, err)
	}
	path := filepath.Join(sum.RunDir, "audit.jsonl")
	b, _ := os.ReadFile(path)
	lines := strings.SplitAfter(string(b), "\n")
	os.WriteFile(path, []byte(strings.Join(lines[:len(lines)-3], "")), 0o644) // drop run_end and the last result
	rep, err := VerifyRun(sum.RunDir)
	if err != nil || rep.OK || rep.BrokenLine != len(lines)-3 {
		t.Errorf("cut run: %+v %v, want broken at line %d", rep, err, len(lines)-3)
	}
}

func FuzzParseTask(f *testing.F) {
	if b, err := os.ReadFile(filepath.Join(fixtures, "tasks/tester-ok.json")); err == nil {
		f.Add(b)
	}
	f.Add([]byte(`{"steps":[{"tool":"read_log"}]}`))
	f.Add([]byte("steps:\n  - tool: tail_log\n    args: {path: a, lines: 2}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, parse := range []func([]byte) (*Task, error){ParseTaskJSON, ParseTaskYAML} {
			task, err := parse(data)
			if err != nil {
				continue
			}
			for i, s := range task.Steps {
				if s.Tool == "" || !json.Valid(s.Args) {
					t.Fatalf("step %d = %+v: empty tool or invalid args accepted", i, s)
				}
			}
		}
	})
}
