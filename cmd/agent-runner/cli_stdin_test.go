package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agent-runner/agent-runner/job"
)

// TestStdinAndUsageExitCodes covers --request - for run and validate, and
// usage mistakes, through the built binary's real exit-code mapping.
func TestStdinAndUsageExitCodes(t *testing.T) {
	store := sandboxTempDir(t)
	good := request(t, `["cat","a.txt"]`, `["cat"]`, "")
	tests := []struct {
		name   string
		stdin  string
		args   []string
		want   int
		code   job.Code
		status job.Status
	}{
		{"run from stdin", good, []string{"run", "--request", "-", "--store-dir", store}, exitOK, "", job.StatusCompleted},
		{"denial from stdin still exits 0", request(t, `["bash","-c","id"]`, `["bash"]`, ""), []string{"run", "--request", "-", "--store-dir", store}, exitOK, "", job.StatusPolicyDenied},
		{"invalid JSON on stdin", "{", []string{"run", "--request", "-", "--store-dir", store}, exitInvalid, job.CodeInvalidRequest, ""},
		{"empty stdin", "", []string{"run", "--request", "-", "--store-dir", store}, exitInvalid, job.CodeInvalidRequest, ""},
		{"trailing data on stdin", good + " {}", []string{"run", "--request", "-", "--store-dir", store}, exitInvalid, job.CodeInvalidRequest, ""},
		{"validate from stdin", good, []string{"validate", "--request", "-"}, exitOK, "", ""},
		{"validate schema failure from stdin", strings.Replace(good, `"command":{`, `"command":{"shell":"sh -c x",`, 1), []string{"validate", "--request", "-"}, exitInvalid, "", ""},
		{"validate path escape", strings.Replace(good, `"command":{`, `"command":{"cwd":"/etc",`, 1), []string{"validate", "--request", "-"}, exitInvalid, "", ""},
		{"unknown flag", "", []string{"run", "--frobnicate"}, exitInvalid, "", ""},
		{"stray argument", good, []string{"run", "extra", "--request", "-"}, exitInvalid, "", ""},
		{"unknown backend flag", good, []string{"run", "--request", "-", "--store-dir", store, "--backend", "docker"}, exitInvalid, job.CodeInvalidRequest, ""},
		{"firecracker backend flag", good, []string{"run", "--request", "-", "--store-dir", store, "--backend", "firecracker"}, exitOK, "", job.StatusBackendUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdout, stderr, code := cli(t, tt.stdin, tt.args...)
			if code != tt.want {
				t.Fatalf("exit %d, want %d; stdout %s stderr %s", code, tt.want, stdout, stderr)
			}
			if tt.code != "" {
				var e struct{ Error job.Error }
				if err := json.Unmarshal([]byte(strings.TrimSpace(stderr)), &e); err != nil || e.Error.Code != tt.code {
					t.Errorf("stderr = %q, want error code %q", stderr, tt.code)
				}
			}
			if tt.status != "" {
				var res job.Result
				if err := json.Unmarshal([]byte(stdout), &res); err != nil || res.Status != tt.status {
					t.Errorf("result status = %q (%v), want %s; stdout %s", res.Status, err, tt.status, stdout)
				}
			}
		})
	}
}
