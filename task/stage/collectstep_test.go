package stage

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/runner"
	"github.com/agent-runner/agent-runner/task/tasktest"
)

// TestCollectIsAStep: the collection is a run of the run service it is
// given, recorded as runs/<task_id>.collect with its policy decision
// (the fixed shell policy) and result; and without one, in the task's
// own step store.
func TestCollectIsAStep(t *testing.T) {
	l, tk, _ := staged(t)
	if err := os.WriteFile(filepath.Join(l.Inbox(), "new.txt"), []byte("new\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := runner.New(runner.Config{StoreDir: filepath.Join(t.TempDir(), "store")})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	c, err := CollectOn(context.Background(), r, l, tk, tasktest.Backend(t), CollectLimits{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := tk.Metadata.ID + ".collect"; c.RunID != want || len(c.Artifacts) != 2 {
		t.Fatalf("collection = %+v, want run %s and two artifacts", c, want)
	}
	res, err := r.Store().ReadResult(c.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != job.StatusCompleted || res.PolicyDecision.Action != job.ActionAllow || res.Stdout.SHA256 == "" {
		t.Errorf("recorded collection = %s %+v stdout %+v, want completed, allowed, hashed", res.Status, res.PolicyDecision, res.Stdout)
	}
	req, err := r.Store().ReadRequest(c.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if req.Workspace.Path != l.Inbox() || !slices.Equal(req.Policy.AllowedCommands, []job.CommandRule{{Basename: "sh"}}) {
		t.Errorf("recorded request = workspace %s policy %+v, want the inbox and the shell policy", req.Workspace.Path, req.Policy)
	}

	arts, err := Collect(context.Background(), l, tk, tasktest.Backend(t), CollectLimits{}, nil)
	if err != nil || len(arts) != 2 {
		t.Fatalf("Collect without a run service = %v, %v", arts, err)
	}
	if _, err := os.Stat(filepath.Join(l.StepStore(), "runs", c.RunID, "result.json")); err != nil {
		t.Errorf("Collect without a run service left no record in the task's step store: %v", err)
	}
}
