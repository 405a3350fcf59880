package sandboxe2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agent-runner/agent-runner/agent/launch"
	"github.com/agent-runner/agent-runner/job"
)

// callOut is a subprocess tool's result as the audit records it.
type callOut struct {
	JobID    string `json:"job_id"`
	Status   string `json:"status"`
	ExitCode *int   `json:"exit_code"`
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
	Sandbox  string `json:"sandbox"`
}

// auditLine is one line of audit.jsonl, the fields these tests read.
type auditLine struct {
	Event   string          `json:"event"`
	Call    int64           `json:"call"`
	Allowed *bool           `json:"allowed"`
	Code    string          `json:"code"`
	Result  json.RawMessage `json:"result"`
}

// readAudit returns the run's tool_call lines and tool_result results by
// call number.
func readAudit(t *testing.T, runDir string) (map[int64]auditLine, map[int64]callOut) {
	t.Helper()
	f, err := os.Open(filepath.Join(runDir, "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	calls, results := map[int64]auditLine{}, map[int64]callOut{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l auditLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		switch l.Event {
		case "tool_call":
			calls[l.Call] = l
		case "tool_result":
			var o callOut
			json.Unmarshal(l.Result, &o)
			results[l.Call] = o
		}
	}
	return calls, results
}

// leftovers are the host's processes whose command line holds marker
// and the cgroups named for sandbox id.
func leftovers(marker, id string) []string {
	var found []string
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(marker)) {
			found = append(found, p+": "+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	filepath.WalkDir("/sys/fs/cgroup", func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if strings.HasPrefix(d.Name(), "agent-runner-"+id+"-") {
			found = append(found, p)
			return fs.SkipDir
		}
		return nil
	})
	return found
}

// python is a run_tests step running python3 -c code in the sample crate.
func python(code string) launch.Step {
	b, _ := json.Marshal(map[string]any{"command": "/usr/bin/python3", "working_directory": "testdata/sample-crate", "args": []string{"-c", code}})
	return launch.Step{Tool: "run_tests", Args: b}
}

// TestRunToolsShareOneSandbox: a capability run's subprocess tool calls
// are processes of one sandbox. Call 1 writes to the sandbox's private
// /tmp and leaves a process running; call 2 reads the file and sees the
// process; both records name the run's sandbox; a shell stays denied to
// every process of it, and a call the gateway denies is audited as
// before and runs nothing. However the run ends (finished, failed at
// max_tool_calls, canceled, a panic in its caller), the sandbox is gone
// afterwards: no process, no cgroup.
func TestRunToolsShareOneSandbox(t *testing.T) {
	dir := workdir(t)
	cases := []struct {
		name      string
		maxCalls  int
		extra     []launch.Step
		cancel    bool // the run's context ends once call 1 is recorded
		panics    bool // the caller panics after call 2, its Close deferred
		wantExit  string
		wantCalls int
	}{
		{name: "finished", maxCalls: 10, extra: []launch.Step{
			python("import subprocess,sys; sys.exit(subprocess.run(['/bin/sh','-c','true']).returncode)"),
			{Tool: "run_tests", Args: json.RawMessage(`{"command":"/bin/sh","working_directory":"testdata/sample-crate","args":["-c","true"]}`)},
		}, wantExit: launch.ExitCompleted, wantCalls: 4},
		{name: "failed", maxCalls: 3, extra: []launch.Step{python("import sys; sys.exit(3)"), python("print(1)")}, wantExit: launch.ExitMaxToolCalls, wantCalls: 4},
		{name: "canceled", maxCalls: 10, cancel: true, wantExit: launch.ExitCanceled, wantCalls: 1},
		{name: "panic", maxCalls: 10, panics: true, wantCalls: 2},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			marker := fmt.Sprintf("9%03d.%d", i, os.Getpid())
			manifest := fmt.Sprintf(`name: one-sandbox
capabilities:
  tools: [run_tests]
  filesystem: {read: [testdata/sample-crate], write: [testdata/sample-crate/target]}
  commands: {allow: [/usr/bin/python3]}
limits: {max_tool_calls: %d}
`, tc.maxCalls)
			mpath := filepath.Join(dir, tc.name+".yaml")
			os.WriteFile(mpath, []byte(manifest), 0o644)
			steps := []launch.Step{
				python(fmt.Sprintf("import subprocess; open('/tmp/note','w').write('call-one'); subprocess.Popen(['/usr/bin/sleep','%s'], start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)", marker)),
				python(fmt.Sprintf("import os; print(open('/tmp/note').read()); print(any(b'%s' in open('/proc/'+p+'/cmdline','rb').read() for p in os.listdir('/proc') if p.isdigit()))", marker)),
			}
			steps = append(steps, tc.extra...)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			opts := launch.Options{RunsDir: filepath.Join(dir, "runs")}
			if tc.cancel {
				opts.OnStep = func(launch.StepRecord) { cancel() }
			}
			s, err := launch.Open(ctx, mpath, launch.ModeScripted, opts)
			if err != nil {
				t.Fatal(err)
			}
			sandbox := s.ID + ".sandbox"
			if tc.panics {
				func() {
					defer func() { recover() }()
					defer s.Close()
					for _, st := range steps {
						s.Call(ctx, st.Tool, st.Args)
					}
					panic("the caller fails")
				}()
			} else {
				sum, err := s.RunTask(ctx, &launch.Task{Steps: steps})
				if err != nil || sum.ExitReason != tc.wantExit {
					t.Fatalf("run ended %q, %v; want %q", sum.ExitReason, err, tc.wantExit)
				}
			}
			if left := leftovers(marker, sandbox); len(left) > 0 {
				t.Errorf("left after the run: %q", left)
			}
			calls, results := readAudit(t, s.Dir)
			if len(calls) != tc.wantCalls {
				t.Errorf("audited calls = %d, want %d", len(calls), tc.wantCalls)
			}
			one := results[1]
			if one.Status != string(job.StatusCompleted) || one.Sandbox != sandbox || one.JobID != s.ID+".call-1" {
				t.Errorf("call 1 = %+v, want completed in %s as %s.call-1", one, sandbox, s.ID)
			}
			if tc.cancel {
				return
			}
			if two := results[2]; two.Stdout != "call-one\nTrue\n" || two.Sandbox != sandbox {
				t.Errorf("call 2 = %+v, want the note of call 1 and its process seen, in %s", two, sandbox)
			}
			for _, n := range []int{1, 2} {
				var rec job.Result
				b, err := os.ReadFile(filepath.Join(s.Dir, "jobs", "runs", fmt.Sprintf("%s.call-%d", s.ID, n), "result.json"))
				if err == nil {
					err = json.Unmarshal(b, &rec)
				}
				if err != nil || rec.Sandbox != sandbox {
					t.Errorf("record of call %d: sandbox %q, %v; want %q", n, rec.Sandbox, err, sandbox)
				}
			}
			if tc.name != "finished" {
				return
			}
			if three := results[3]; three.ExitCode == nil || *three.ExitCode == 0 || !strings.Contains(three.Stderr, "Permission denied") {
				t.Errorf("call 3 ran a shell: %+v, want it denied", three)
			}
			if four := calls[4]; four.Allowed == nil || *four.Allowed || four.Code != string(job.CodeCommandDenied) {
				t.Errorf("call 4 audited %+v, want denied %s", four, job.CodeCommandDenied)
			}
			if _, err := os.Stat(filepath.Join(s.Dir, "jobs", "runs", s.ID+".call-4")); err == nil {
				t.Errorf("the denied call 4 has a run record")
			}
		})
	}
}
