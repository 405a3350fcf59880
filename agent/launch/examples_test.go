package launch

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The manifests and tasks in examples/agents run as documented.
func TestExamples(t *testing.T) {
	runs := t.TempDir()
	t.Chdir("../..") // examples use paths relative to the repository root
	tests := []struct {
		manifest, task string
		want           []stepShape
	}{
		{"examples/agents/log-analyst.yaml", "examples/agents/tasks/log-triage.json", []stepShape{
			{Tool: "list_logs", Allowed: true, OK: true},
			{Tool: "tail_log", Allowed: true, OK: true},
			{Tool: "grep_log", Allowed: true, OK: true},
			{Tool: "read_log", Code: "validation.path_escape"},
			{Tool: "read_log", Code: "validation.path_escape"},
			{Tool: "run_tests", Code: "policy.tool_denied"},
		}},
		{"examples/agents/pytest-runner.yaml", "examples/agents/tasks/run-pytest.yaml", []stepShape{
			{Tool: "run_tests", Allowed: true, OK: true, JobStatus: "completed"},
			{Tool: "run_tests", Code: "policy.command_denied"},
			{Tool: "git_status", Code: "policy.tool_denied"},
		}},
	}
	for _, tt := range tests {
		t.Run(filepath.Base(tt.task), func(t *testing.T) {
			task, err := LoadTask(tt.task)
			if err != nil {
				t.Fatal(err)
			}
			sum, err := Scripted(context.Background(), tt.manifest, task, Options{Backend: "local_process", RunsDir: runs})
			if err != nil {
				t.Fatal(err)
			}
			var got []stepShape
			for _, s := range sum.Steps {
				got = append(got, stepShape{Tool: s.Tool, Code: s.Code, JobStatus: s.JobStatus, Allowed: s.Allowed, OK: s.OK})
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("steps (-want +got):\n%s (python3-pytest is needed for run-pytest)", diff)
			}
		})
	}
}
