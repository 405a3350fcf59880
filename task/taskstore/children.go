package taskstore

import (
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/agent-runner/agent-runner/egress"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/task/lifecycle"
	"github.com/agent-runner/agent-runner/task/manifest"
	"github.com/agent-runner/agent-runner/task/state"
)

// DefaultMaxConcurrent is children.max_concurrent when a manifest's
// children block leaves it out.
const DefaultMaxConcurrent = 5

// MaxChildren bounds how many children one task may create in total, and
// MaxDepth how deep a family can grow (a top-level task is depth 0), so an
// agent cannot multiply itself without bound.
const (
	MaxChildren = 100
	MaxDepth    = 3
)

type queued struct {
	t   *manifest.Task
	doc []byte
}

// SubmitChild records a subtask created by a running parent (through its
// children socket) and starts it once fewer than the parent's
// children.max_concurrent children are active; until then it waits in
// pending. A child may not reach beyond its parent: same repository, no
// network the parent lacks, only secrets the parent was given, no more CPU,
// memory, time or concurrent children; and it meets the operator's rules
// (lifecycle.Admit) like any task.
func (s *Store) SubmitChild(parentID string, doc []byte) (string, error) {
	parent, err := s.manifest(parentID)
	if err != nil {
		return "", err
	}
	if parent.Children == nil {
		return "", job.Errorf(job.CodeForbidden, "task %s has no children block in its manifest", parentID)
	}
	t, err := manifest.ParseChild(doc, parent)
	if err != nil {
		return "", err
	}
	if t.ParentID != "" && t.ParentID != parentID {
		return "", job.Errorf(job.CodeForbidden, "a task can only create its own children").With("parent_id", t.ParentID)
	}
	t.ParentID = parentID
	if err := withinParent(parent, t); err != nil {
		return "", err
	}
	if err := lifecycle.Admit(s.Lifecycle, t); err != nil {
		return "", err
	}
	// The stored manifest is the resolved one (inherited limits, parent_id),
	// so a restart runs the child exactly as accepted.
	if doc, err = yaml.Marshal(t); err != nil {
		return "", job.Wrap(job.CodeInternal, err, "cannot store the child manifest")
	}
	if d := s.depth(parentID); d+1 > MaxDepth {
		return "", job.Errorf(job.CodeForbidden, "task %s is at depth %d; children may nest at most %d deep", parentID, d, MaxDepth)
	}
	if n := len(s.Children(parentID)); n >= MaxChildren {
		return "", job.Errorf(job.CodeLimitExceeded, "task %s already has %d children (the limit)", parentID, n)
	}
	if err := s.createNew(t, doc); err != nil {
		return "", err
	}
	if err := s.schedule(t, doc, parent); err != nil {
		s.removeRecord(t.Metadata.ID)
		return "", err
	}
	return t.Metadata.ID, nil
}

// maxConcurrent is how many children t may run at once.
func maxConcurrent(t *manifest.Task) int {
	if t != nil && t.Children != nil && t.Children.MaxConcurrent > 0 {
		return t.Children.MaxConcurrent
	}
	return DefaultMaxConcurrent
}

// schedule dispatches a child now, or holds it behind its siblings when
// parent's max_concurrent children are already active.
func (s *Store) schedule(t *manifest.Task, doc []byte, parent *manifest.Task) error {
	s.mu.Lock()
	if s.activeChildrenLocked(t.ParentID, t.Metadata.ID) >= maxConcurrent(parent) {
		s.waiting[t.ParentID] = append(s.waiting[t.ParentID], queued{t, doc})
		s.mu.Unlock()
		return nil
	}
	s.dispatched[t.Metadata.ID] = true
	s.mu.Unlock()
	return s.dispatch(t, doc)
}

// activeChildrenLocked counts parentID's children that hold a
// max_concurrent slot (except one): started, or pending and handed to
// the queue. It reads their states from the store, so children that
// workers of other processes ran are counted as they end.
func (s *Store) activeChildrenLocked(parentID, except string) int {
	n := 0
	for _, c := range s.Children(parentID) {
		switch {
		case c.TaskID == except || c.State.Terminal():
		case c.State != state.Pending || s.dispatched[c.TaskID]:
			n++
		}
	}
	return n
}

// withinParent refuses a child that asks for more than its parent has.
func withinParent(parent, child *manifest.Task) error {
	deny := func(field, format string, args ...any) error {
		return job.Errorf(job.CodeForbidden, format, args...).With("field", field)
	}
	switch {
	case child.Repository.URL != parent.Repository.URL:
		return deny("repository.url", "a child task must use its parent's repository (%s); branches may differ", parent.Repository.URL)
	case child.Network() != job.NetworkDisabled && child.Network() != parent.Network():
		return deny("vm.network_mode", "a child task cannot have network mode %q when its parent has %q", child.VM.NetworkMode, parent.VM.NetworkMode)
	case child.Network() == job.NetworkAllowlist && len(outsideParent(child, parent)) > 0:
		return deny("vm.allowed_hosts", "a child task can only reach hosts its parent may reach (not %v)", outsideParent(child, parent))
	case child.VM.CPUs > parent.VM.CPUs:
		return deny("vm.cpus", "a child task cannot have more CPUs (%d) than its parent (%d)", child.VM.CPUs, parent.VM.CPUs)
	case child.MemoryBytes() > parent.MemoryBytes():
		return deny("vm.memory", "a child task cannot have more memory (%s) than its parent (%s)", child.VM.Memory, parent.VM.Memory)
	case child.Timeout() > parent.Timeout():
		return deny("lifecycle.timeout", "a child task cannot run longer (%s) than its parent (%s)", child.Lifecycle.Timeout, parent.Lifecycle.Timeout)
	case child.Children != nil && maxConcurrent(child) > maxConcurrent(parent):
		return deny("children.max_concurrent", "a child task cannot run more children at once (%d) than its parent (%d)", maxConcurrent(child), maxConcurrent(parent))
	}
	for _, sec := range child.Secrets {
		if !slices.Contains(parent.Secrets, sec) {
			return deny("secrets", "a child task can only use secrets its parent was given (%s)", sec.Name)
		}
	}
	return nil
}

// manifest reads a stored task's manifest.
func (s *Store) manifest(id string) (*manifest.Task, error) {
	b, err := os.ReadFile(filepath.Join(s.Dir(id), "manifest.yaml"))
	if err != nil {
		return nil, job.Errorf(job.CodeJobNotFound, "task not found").With("task_id", id)
	}
	return manifest.Parse(b)
}

// childrenFile, in a parent's directory, lists its children's ids one per
// line, appended as they are created, so finding them does not scan the
// store.
const childrenFile = "children"

// Children returns the records of a task's children in creation order.
func (s *Store) Children(parentID string) []state.Record {
	b, err := os.ReadFile(filepath.Join(s.Dir(parentID), childrenFile))
	if err != nil {
		return nil
	}
	var out []state.Record
	for _, id := range strings.Fields(string(b)) {
		if m, err := s.Open(id); err == nil && m.Current().ParentID == parentID {
			out = append(out, m.Current())
		}
	}
	return out
}

// indexChild appends a new child to its parent's list.
func (s *Store) indexChild(parentID, id string) error {
	f, err := os.OpenFile(filepath.Join(s.Dir(parentID), childrenFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return job.Wrap(job.CodeRunIOFailed, err, "cannot record the child")
	}
	_, err = f.WriteString(id + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return job.Wrap(job.CodeRunIOFailed, err, "cannot record the child")
	}
	return nil
}

// depth counts a task's ancestors.
func (s *Store) depth(id string) int {
	d := 0
	for d <= MaxDepth {
		m, err := state.Open(s.Dir(id))
		if err != nil || m.Current().ParentID == "" {
			break
		}
		id, d = m.Current().ParentID, d+1
	}
	return d
}

// release dispatches parentID's waiting children while it has free
// slots. A child the queue refuses ends failed with the queue's error.
func (s *Store) release(parentID string) {
	parent, err := s.manifest(parentID)
	if err != nil {
		parent = nil // gone: its children take the default slots
	}
	for {
		s.mu.Lock()
		q := s.waiting[parentID]
		if len(q) == 0 || s.activeChildrenLocked(parentID, "") >= maxConcurrent(parent) {
			s.mu.Unlock()
			return
		}
		next := q[0]
		if s.waiting[parentID] = q[1:]; len(q) == 1 {
			delete(s.waiting, parentID)
		}
		s.dispatched[next.t.Metadata.ID] = true
		s.mu.Unlock()
		if err := s.dispatch(next.t, next.doc); err != nil {
			if m, oerr := s.Open(next.t.Metadata.ID); oerr == nil {
				s.transition(m, state.Failed, "the queue refused the child", job.AsError(err))
			}
		}
	}
}

// ReleaseWaiting lets waiting children go whose siblings ended on workers
// of other processes (a child that ends in this process releases the next
// at once). serve calls it every few seconds.
func (s *Store) ReleaseWaiting() {
	s.mu.Lock()
	parents := make([]string, 0, len(s.waiting))
	for p := range s.waiting {
		parents = append(parents, p)
	}
	s.mu.Unlock()
	for _, p := range parents {
		s.release(p)
	}
}

// outsideParent lists the child's allowed hosts its parent's do not cover.
func outsideParent(child, parent *manifest.Task) []egress.Rule {
	c, err := child.AllowedHosts()
	if err != nil {
		return nil
	}
	p, _ := parent.AllowedHosts()
	return egress.Within(c, p)
}
