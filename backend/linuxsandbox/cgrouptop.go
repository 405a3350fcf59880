package linuxsandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// topGroup is the runner's own group at the top of a cgroup v2 hierarchy,
// the parent of every job group of a root runner that shares its own
// cgroup with other processes (cgroup2.go). It holds no process, so it
// may enable controllers for its children; it stays when the runner
// exits, and every runner on the host shares it (job groups are named by
// job id and init pid).
const topGroup = "agent-runner"

// v2Plan is where a job's group goes on the unified hierarchy.
type v2Plan struct {
	parent string // the job groups' parent
	move   bool   // the runner first moves itself into parent/runner (enterLeaf)
	// top, when set, is the hierarchy's root: parent is its topGroup,
	// created and given the controllers first (makeTopGroup).
	top string
}

// v2Plan chooses the runner's own cgroup where it may create job groups
// there, else its top-level group, else refuses with the fix.
func (h cgroupHost) v2Plan(l cgroupLayout) (v2Plan, error) {
	parent, move := l.v2Parent()
	ownErr := h.v2OwnUsable(parent, move)
	if ownErr == nil {
		return v2Plan{parent: parent, move: move}, nil
	}
	topErr := h.v2TopUsable(l)
	if topErr == nil {
		return v2Plan{parent: filepath.Join(l.v2Root, topGroup), top: l.v2Root}, nil
	}
	return v2Plan{}, fmt.Errorf("%w, and no group of its own can be made at the top of the hierarchy (%v): %s", ownErr, topErr, v2Fix)
}

// v2Fix is how an operator gives the runner a cgroup on a v2 host.
const v2Fix = "run agent-runner as a systemd service with Delegate=yes (or under `systemd-run --scope -p Delegate=yes agent-runner ...`), or as root where it may create " + cgroupRoot + "/" + topGroup + ", or alone in a group of its own (mkdir " + cgroupRoot + "/agent-runner-main; echo $$ > " + cgroupRoot + "/agent-runner-main/cgroup.procs; exec agent-runner ...); see docs/operations.md"

// v2TopUsable reports why a root runner cannot use a top-level group of
// its own, or nil: it must be root, see the host's whole hierarchy (not a
// cgroup namespace's or a container's subtree), whose root offers the
// controllers and lets it write subtree_control.
func (h cgroupHost) v2TopUsable(l cgroupLayout) error {
	if h.uid != 0 {
		return errors.New("the runner is not root")
	}
	if l.v2Root == "" {
		return errors.New("the cgroup2 mount shows only a subtree of the hierarchy")
	}
	if _, err := os.Stat(filepath.Join(l.v2Root, "cgroup.type")); err == nil {
		return fmt.Errorf("%s is a cgroup namespace's root, not the host's", l.v2Root)
	}
	if missing := missingControllers(l.v2Root, "cgroup.controllers"); len(missing) > 0 {
		return fmt.Errorf("the hierarchy's root offers no %s controller", strings.Join(missing, ", "))
	}
	for _, p := range []string{l.v2Root, filepath.Join(l.v2Root, "cgroup.subtree_control")} {
		if err := unix.Access(p, unix.W_OK); err != nil {
			return fmt.Errorf("the runner may not write %s: %w", p, err)
		}
	}
	return nil
}

// makeTopGroup enables the controllers in the root's subtree_control
// (the root may hold processes and still hand them out), creates top (the
// topGroup) and enables them in its own subtree_control.
func makeTopGroup(root, top string) error {
	if missing := missingControllers(root, "cgroup.subtree_control"); len(missing) > 0 {
		if err := enableControllers(root, missing); err != nil {
			return err
		}
	}
	if err := os.Mkdir(top, 0o755); err != nil && !os.IsExist(err) {
		return fmt.Errorf("create the runner's group: %w", err)
	}
	if missing := missingControllers(top, "cgroup.subtree_control"); len(missing) > 0 {
		return enableControllers(top, missing)
	}
	return nil
}
