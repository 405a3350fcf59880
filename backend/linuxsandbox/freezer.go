package linuxsandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// A kept sandbox is paused with the cgroup freezer: on a v2 host its own
// group's cgroup.freeze, on a v1 or hybrid host a group of its own in the
// freezer hierarchy, made beside the memory, pids and cpu groups (under
// the runner's own freezer group) and joined by the init before it starts
// anything, so every process of the sandbox is in it. Where neither
// exists, Pause fails closed (backend.unavailable) and the sandbox keeps
// running.

// freezer is one sandbox's freezer control.
type freezer struct {
	// state is the file written to freeze and thaw: a v1 group's
	// freezer.state, or a v2 group's cgroup.freeze.
	state string
	// v1 is set for a v1 group (whose directory Delete removes).
	v1 bool
}

// newFreezer finds or makes the freezer of the sandbox whose init is pid
// (still waiting for its config), in cg (nil without cgroups).
func newFreezer(h cgroupHost, cg *cgroup, name string, pid int) (*freezer, error) {
	if cg != nil {
		if c2, ok := cg.files.(*cgroup2); ok {
			f := filepath.Join(c2.dir, "cgroup.freeze")
			if _, err := os.Stat(f); err != nil {
				return nil, fmt.Errorf("the sandbox's cgroup has no cgroup.freeze: %w", err)
			}
			return &freezer{state: f}, nil
		}
	}
	l, err := h.layout()
	if err != nil {
		return nil, err
	}
	own, ok := l.v1["freezer"]
	if !ok {
		return nil, errors.New("no cgroup freezer here (no v1 freezer hierarchy the runner is in, no cgroup v2 group of the sandbox's own)")
	}
	dir := filepath.Join(own, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("cannot make the sandbox's freezer group: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
		removeCgroupDir(dir)
		return nil, fmt.Errorf("cannot join the freezer group: %w", err)
	}
	return &freezer{state: filepath.Join(dir, "freezer.state"), v1: true}, nil
}

// set freezes or thaws the group and waits until the kernel says it is
// done (a v1 group passes through FREEZING; a v2 group reports frozen in
// cgroup.events).
func (f *freezer) set(ctx context.Context, frozen bool) error {
	want, value := "THAWED", "THAWED"
	done := filepath.Join(filepath.Dir(f.state), "freezer.state")
	if frozen {
		want, value = "FROZEN", "FROZEN"
	}
	if !f.v1 {
		value, want = "0", "frozen 0"
		if frozen {
			value, want = "1", "frozen 1"
		}
		done = filepath.Join(filepath.Dir(f.state), "cgroup.events")
	}
	for {
		if err := os.WriteFile(f.state, []byte(value), 0o644); err != nil {
			return err
		}
		b, err := os.ReadFile(done)
		if err != nil {
			return err
		}
		if strings.Contains(string(b), want) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
}

// thaw thaws the group before Delete kills it (a frozen v1 task cannot
// die), giving up after a second.
func (f *freezer) thaw() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = f.set(ctx, false)
}

// remove deletes a v1 group once the sandbox is gone.
func (f *freezer) remove() {
	if f.v1 {
		removeCgroupDir(filepath.Dir(f.state))
	}
}
