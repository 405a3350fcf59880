package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agent-runner/agent-runner/job"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "agent-runner-cli")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "agent-runner")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		panic("go build: " + err.Error() + "\n" + string(out))
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// cli runs the binary and returns stdout, stderr and the exit code.
func cli(t *testing.T, stdin string, args ...string) (string, string, int) {
	t.Helper()
	return runCLI(t, stdin, nil, args...)
}

// runCLI runs the binary with stdin and env added to its environment and
// returns stdout, stderr and the exit code.
func runCLI(t *testing.T, stdin string, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Dir = t.TempDir()
	cmd.Stdin = strings.NewReader(stdin)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

func requestFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "req.json")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func request(t *testing.T, argv, allowed string, extra string) string {
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("a\n"), 0o644)
	return `{"workspace":{"path":"` + ws + `"},"command":{"argv":` + argv + `},"policy":{"allowed_commands":` + allowed + `}` + extra + `}`
}

func TestRunExitCodes(t *testing.T) {
	store := sandboxTempDir(t)
	tests := []struct {
		name   string
		body   string
		status job.Status
	}{
		{"completed", request(t, `["cat","a.txt"]`, `["cat"]`, ""), job.StatusCompleted},
		{"failed command", request(t, `["false"]`, `["false"]`, ""), job.StatusFailed},
		{"shell denied", request(t, `["sh","-c","id"]`, `["sh"]`, ""), job.StatusPolicyDenied},
		{"timed out", request(t, `["sleep","5"]`, `["sleep"]`, `,"limits":{"timeout_ms":100}`), job.StatusTimedOut},
		{"backend unavailable", request(t, `["true"]`, `["true"]`, `,"backend":{"kind":"firecracker"}`), job.StatusBackendUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, stderr, code := cli(t, "", "run", "--request", requestFile(t, tt.body), "--store-dir", store)
			if code != 0 {
				t.Fatalf("exit %d, want 0 (a result was produced); stderr %s", code, stderr)
			}
			var res job.Result
			if err := json.Unmarshal([]byte(out), &res); err != nil || res.Status != tt.status {
				t.Errorf("status = %q (%v), want %q", res.Status, err, tt.status)
			}
		})
	}
}

func TestRunFromStdinAndOut(t *testing.T) {
	store := sandboxTempDir(t)
	outFile := filepath.Join(t.TempDir(), "result.json")
	_, stderr, code := cli(t, request(t, `["cat","a.txt"]`, `["cat"]`, ""), "run", "--request", "-", "--store-dir", store, "--out", outFile)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	b, _ := os.ReadFile(outFile)
	var res job.Result
	if json.Unmarshal(b, &res); res.Stdout.Text != "a\n" {
		t.Errorf("--out result stdout = %q, want %q", res.Stdout.Text, "a\n")
	}
}

func TestOperationalExitCodes(t *testing.T) {
	store := sandboxTempDir(t)
	good := requestFile(t, request(t, `["true"]`, `["true"]`, ""))
	tests := []struct {
		name string
		args []string
		want int
		code job.Code
	}{
		{"invalid JSON", []string{"run", "--request", requestFile(t, "{not json")}, exitInvalid, job.CodeInvalidRequest},
		{"unknown field", []string{"run", "--request", requestFile(t, request(t, `["true"]`, `["true"]`, `,"surprise":1`))}, exitInvalid, job.CodeInvalidRequest},
		{"unreadable file", []string{"run", "--request", "/nonexistent/req.json"}, exitInvalid, job.CodeInvalidRequest},
		{"validation failure", []string{"run", "--request", requestFile(t, strings.Replace(request(t, `["true"]`, `["true"]`, ""), `"command":{`, `"command":{"cwd":"../..",`, 1))}, exitInvalid, job.CodePathEscape},
		{"missing flag", []string{"run"}, exitInvalid, ""},
		{"unknown command", []string{"frobnicate"}, exitInvalid, ""},
		{"unwritable out", []string{"run", "--request", good, "--out", "/nonexistent-dir/x/result.json"}, exitOperational, job.CodeRunIOFailed},
		{"replay missing run", []string{"replay", "--run", "/nonexistent/runs/job_x"}, exitInvalid, job.CodeJobNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, stderr, code := cli(t, "", append(tt.args, "--store-dir", store)...)
			if tt.args[0] == "frobnicate" {
				_, stderr, code = cli(t, "", tt.args...)
			}
			if code != tt.want {
				t.Fatalf("exit %d, want %d; stderr %s", code, tt.want, stderr)
			}
			if tt.code != "" {
				var e struct{ Error job.Error }
				if err := json.Unmarshal([]byte(strings.TrimSpace(stderr)), &e); err != nil || e.Error.Code != tt.code {
					t.Errorf("stderr = %q, want error code %q", stderr, tt.code)
				}
			}
		})
	}
}

func TestValidate(t *testing.T) {
	ok := requestFile(t, request(t, `["true"]`, `["true"]`, ""))
	out, _, code := cli(t, "", "validate", "--request", ok)
	if code != 0 || !strings.Contains(out, `"valid": true`) {
		t.Errorf("validate good = %d %q", code, out)
	}
	bad := requestFile(t, request(t, `[]`, `["true"]`, ""))
	_, stderr, code := cli(t, "", "validate", "--request", bad)
	if code != exitInvalid || !strings.Contains(stderr, string(job.CodeInvalidRequest)) {
		t.Errorf("validate empty argv = %d %q", code, stderr)
	}
	limit := requestFile(t, request(t, `["true"]`, `["true"]`, `,"limits":{"timeout_ms":-5}`))
	_, stderr, code = cli(t, "", "validate", "--request", limit)
	if code != exitInvalid || !strings.Contains(stderr, "schema") {
		t.Errorf("validate negative limit = %d %q, want a schema failure", code, stderr)
	}
}

func TestReplayCLI(t *testing.T) {
	store := sandboxTempDir(t)
	out, _, code := cli(t, "", "run", "--request", requestFile(t, request(t, `["cat","a.txt"]`, `["cat"]`, "")), "--store-dir", store)
	var res job.Result
	json.Unmarshal([]byte(out), &res)
	if code != 0 || res.JobID == "" {
		t.Fatalf("run: %d %q", code, out)
	}
	out, stderr, code := cli(t, "", "replay", "--run", filepath.Join(store, "runs", res.JobID))
	if code != 0 || !strings.Contains(out, `"reproduced": true`) {
		t.Errorf("replay = %d %s %s", code, out, stderr)
	}
}
