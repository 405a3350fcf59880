package validation

import (
	"testing"

	"github.com/agent-runner/agent-runner/job"
)

// TestReadOnlyMountsMode: workspace.readonly_mounts_mode is "readonly"
// (also when absent) or "copy_on_write", kept as given; anything else is
// refused.
func TestReadOnlyMountsMode(t *testing.T) {
	ws := mountWorkspace(t)
	for _, tt := range []struct {
		mode   string
		mounts []string
		want   job.Code
	}{
		{"", []string{"node_modules"}, ""},
		{job.MountsReadOnly, []string{"node_modules"}, ""},
		{job.MountsCopyOnWrite, []string{"node_modules", ".venv"}, ""},
		{job.MountsCopyOnWrite, nil, ""},
		{"read_only", []string{"node_modules"}, job.CodeInvalidRequest},
		{"overlay", []string{"node_modules"}, job.CodeInvalidRequest},
		{"COPY_ON_WRITE", nil, job.CodeInvalidRequest},
	} {
		r := base(t)
		r.Workspace.Path = ws
		r.Workspace.ReadOnlyMounts = tt.mounts
		r.Workspace.ReadOnlyMountsMode = tt.mode
		err := Request(&r, cfg)
		if got := job.CodeOf(err); got != tt.want {
			t.Errorf("readonly_mounts_mode %q: code %q (%v), want %q", tt.mode, got, err, tt.want)
			continue
		}
		if err == nil && r.Workspace.ReadOnlyMountsMode != tt.mode {
			t.Errorf("readonly_mounts_mode %q became %q", tt.mode, r.Workspace.ReadOnlyMountsMode)
		}
		if err != nil {
			if f, _ := err.(*job.Error).Details["field"].(string); f != "workspace.readonly_mounts_mode" {
				t.Errorf("readonly_mounts_mode %q: error names field %q", tt.mode, f)
			}
		}
	}
}
