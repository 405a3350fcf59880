package hostcheck

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

func TestFilesystemsAndDevices(t *testing.T) {
	withOverlay := map[string]string{"/proc/filesystems": "nodev\tsysfs\nnodev\ttmpfs\n\text4\nnodev\toverlay\n"}
	mounts := func(err error) func(context.Context, string) error {
		return func(context.Context, string) error { return err }
	}
	tests := []struct {
		name    string
		files   map[string]string
		uid     int
		overlay func(context.Context, string) error
		want    map[string]want
	}{
		{"everything there, root", merge(withOverlay, map[string]string{"/dev/loop-control": "", "/dev/kvm": ""}), 0, mounts(nil), map[string]want{
			"overlayfs":        {StatusOK, "overlay is in /proc/filesystems", ""},
			"overlayfs_userns": {StatusOK, "mounts inside a new user namespace (tried under /store)", ""},
			"loop_devices":     {StatusOK, "task vm.disk can be enforced", ""},
			"kvm":              {StatusInfo, "/dev/kvm opens", ""},
		}},
		{"no overlay module", map[string]string{"/proc/filesystems": "nodev\ttmpfs\n\text4\n"}, 0, mounts(nil), map[string]want{
			"overlayfs":        {StatusWarn, "not in /proc/filesystems", "modprobe overlay"},
			"overlayfs_userns": {StatusWarn, "not tried", "overlayfs"},
		}},
		{"overlay refused in a user namespace", withOverlay, 0, mounts(errors.New("mount overlay: operation not permitted")), map[string]want{
			"overlayfs_userns": {StatusWarn, "mount overlay: operation not permitted", "5.11 or later"},
		}},
		{"no user-namespace probe", withOverlay, 0, nil, map[string]want{
			"overlayfs_userns": {StatusInfo, "not probed", ""},
		}},
		{"no loop devices, no KVM", withOverlay, 0, mounts(nil), map[string]want{
			"loop_devices": {StatusWarn, "/dev/loop-control is absent", "modprobe loop"},
			"kvm":          {StatusInfo, "/dev/kvm is absent", ""},
		}},
		{"loop devices, unprivileged", merge(withOverlay, map[string]string{"/dev/loop-control": ""}), 1000, mounts(nil), map[string]want{
			"loop_devices": {StatusWarn, "need root", "run agent-runner as root"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := Host{Root: fakeRoot(t, tt.files), UID: tt.uid, OverlayInUserns: tt.overlay}
			expect(t, h.filesystems(context.Background(), "/store"), tt.want)
		})
	}
}

func TestTools(t *testing.T) {
	h := Host{
		LookPath: func(name string) (string, error) {
			if name == "bwrap" {
				return "/usr/bin/bwrap", nil
			}
			return "", exec.ErrNotFound
		},
		Version: func(_ context.Context, path string) (string, error) { return "bubblewrap 0.8.0", nil },
	}
	expect(t, h.tools(context.Background()), map[string]want{
		"runc":  {StatusInfo, "not on PATH", ""},
		"runsc": {StatusInfo, "not on PATH", ""},
		"bwrap": {StatusInfo, "/usr/bin/bwrap, bubblewrap 0.8.0", ""},
	})
}

// The real probe: this test binary re-execs itself (TestMain hooks the
// child) into a new user and mount namespace and mounts an overlay there.
func TestOverlayInUserns(t *testing.T) {
	if b, _ := os.ReadFile("/proc/filesystems"); !strings.Contains(string(b), "\toverlay") {
		t.Skip("the kernel has no overlayfs")
	}
	dir := t.TempDir()
	if err := overlayInUserns(context.Background(), dir); err != nil {
		t.Fatalf("overlayInUserns: %v", err)
	}
	if got := listDir(t, dir); len(got) != 0 {
		t.Errorf("probe left %v behind", got)
	}
}

// Without the hook the probe refuses to re-exec: any other binary (a test
// binary without MaybeOverlayChild) would run itself again instead.
func TestOverlayProbeNeedsTheHook(t *testing.T) {
	childHooked = false
	defer func() { childHooked = true }()
	err := overlayInUserns(context.Background(), t.TempDir())
	if !errors.Is(err, errNotProbed) {
		t.Errorf("overlayInUserns without the hook = %v, want errNotProbed", err)
	}
}
