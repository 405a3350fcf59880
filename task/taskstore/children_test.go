package taskstore

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agent-runner/agent-runner/egress"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/task/lifecycle"
	"github.com/agent-runner/agent-runner/task/state"
)

func childDoc(id, extra string) []byte {
	return []byte(`version: "1"
kind: Task
metadata: {id: ` + id + `, name: c}
repository: {url: /srv/repo, branch: main}
claude: {prompt: p}
` + extra)
}

// record stores a task (as if submitted) without running it.
func record(t *testing.T, s *Store, id, parent, doc string) {
	t.Helper()
	if _, err := state.Create(s.Dir(id), id, parent); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(s.Dir(id), "manifest.yaml"), []byte(doc), 0o644)
}

// TestChildPolicy checks, without running anything, what a parent may
// ask for: inheritance of unset limits, refusal of anything beyond the
// parent, and the nesting depth.
func TestChildPolicy(t *testing.T) {
	g, _ := egress.New(egress.Config{})
	ceiling, _ := egress.ParseRules([]string{"*.example.com", "*.npmjs.org", "evil.example"})
	s, err := New(t.TempDir(), lifecycle.Config{Egress: &egress.Operator{Gateway: g, Ceiling: ceiling}})
	if err != nil {
		t.Fatal(err)
	}
	record(t, s, "p", "", string(childDoc("p", "vm: {cpus: 2, memory: 1G}\nlifecycle: {timeout: 2h}\nsecrets: [{name: K, source: env, key: K}]\nchildren: {max_concurrent: 2}\n")))
	record(t, s, "plain", "", string(childDoc("plain", "")))
	record(t, s, "net", "", string(childDoc("net", "vm: {network_mode: outbound, allowed_hosts: [api.example.com, \"*.npmjs.org\"]}\nchildren: {}\n")))
	for _, tc := range []struct {
		name, parent, extra string
		code                job.Code
	}{
		{"no children block", "plain", "", job.CodeForbidden},
		{"unknown parent", "ghost", "", job.CodeJobNotFound},
		{"more cpus", "p", "vm: {cpus: 4}\n", job.CodeForbidden},
		{"more memory", "p", "vm: {memory: 2G}\n", job.CodeForbidden},
		{"longer", "p", "lifecycle: {timeout: 3h}\n", job.CodeForbidden},
		{"egress", "p", "vm: {network_mode: full}\n", job.CodeForbidden},
		{"parents hosts narrowed", "net", "vm: {network_mode: outbound, allowed_hosts: [registry.npmjs.org]}\n", ""},
		{"hosts beyond the parents", "net", "vm: {network_mode: outbound, allowed_hosts: [api.example.com, evil.example]}\n", job.CodeForbidden},
		{"other secret", "p", "secrets: [{name: K, source: env, key: HOME}]\n", job.CodeForbidden},
		{"other repo", "p", "", job.CodeForbidden},
		{"other parent", "p", "parent_id: plain\n", job.CodeForbidden},
		{"bad manifest", "p", "vm: {cpus: -1}\n", job.CodeInvalidRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := childDoc("c-"+strings.ReplaceAll(tc.name, " ", "-"), tc.extra)
			if tc.name == "other repo" {
				doc = []byte(strings.Replace(string(doc), "/srv/repo", "/etc", 1))
			}
			_, err := s.SubmitChild(tc.parent, doc)
			if got := job.CodeOf(err); got != tc.code {
				t.Errorf("SubmitChild = %v, want %s", err, tc.code)
			}
		})
	}
	// Depth: p (0) -> d1 (1) -> d2 (2) -> d3 (3) may exist; d3's child may not.
	parent := "p"
	for _, id := range []string{"d1", "d2", "d3"} {
		record(t, s, id, parent, string(childDoc(id, "children: {}\n")))
		parent = id
	}
	if _, err := s.SubmitChild("d3", childDoc("d4", "")); job.CodeOf(err) != job.CodeForbidden || !strings.Contains(err.Error(), "deep") {
		t.Errorf("depth 4 child = %v", err)
	}
}

// TestChildInheritsItsParentsLimits: an accepted child stores its resolved
// manifest, with the parent's limits where it set none and its parent_id.
func TestChildInheritsItsParentsLimits(t *testing.T) {
	s, _ := New(t.TempDir(), lifecycle.Config{})
	record(t, s, "p", "", string(childDoc("p", "vm: {cpus: 1, memory: 768M}\nlifecycle: {timeout: 90m}\nchildren: {}\n")))
	id, err := s.SubmitChild("p", childDoc("kid", ""))
	if err != nil {
		t.Fatal(err)
	}
	s.Wait() // no backend: the child fails fast, which is fine here
	m, err := s.manifest(id)
	if err != nil {
		t.Fatal(err)
	}
	if m.VM.CPUs != 1 || m.VM.Memory != "768M" || m.Lifecycle.Timeout != "90m" || m.ParentID != "p" {
		t.Errorf("stored child manifest = %+v %+v %+v parent %q", m.VM, m.Lifecycle, m.Repository, m.ParentID)
	}
}

// TestRecoveredChildrenWaitForASlot: after a restart, pending children go
// back through max_concurrent instead of all starting at once, and each
// finished child starts the next.
func TestRecoveredChildrenWaitForASlot(t *testing.T) {
	s, _ := New(t.TempDir(), lifecycle.Config{})
	record(t, s, "p", "", string(childDoc("p", "children: {max_concurrent: 1}\n")))
	record(t, s, "c1", "p", string(childDoc("c1", "parent_id: p\n")))
	record(t, s, "c2", "p", string(childDoc("c2", "parent_id: p\n")))
	// A child of p already holds the one slot: it is staging (Recover,
	// which takes directories in name order, ends it after c1 and c2).
	record(t, s, "sibling", "p", string(childDoc("sibling", "parent_id: p\n")))
	for _, id := range []string{"sibling", "c1", "c2"} {
		if err := s.indexChild("p", id); err != nil {
			t.Fatal(err)
		}
	}
	sibling, _ := state.Open(s.Dir("sibling"))
	if err := sibling.Transition(state.Staging, "cloning", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recover(); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	queued := len(s.waiting["p"])
	s.mu.Unlock()
	if queued != 2 {
		t.Fatalf("%d children queued, want 2", queued)
	}
	for _, id := range []string{"c1", "c2"} {
		if m, _ := state.Open(s.Dir(id)); m.Current().State != state.Pending {
			t.Errorf("%s started without a slot: %s", id, m.Current().State)
		}
	}
	// The sibling ends: the queue drains one child at a time.
	if m, _ := state.Open(s.Dir("sibling")); !m.Current().State.Terminal() {
		t.Fatalf("sibling = %s after Recover, want it ended", m.Current().State)
	}
	s.release("p")
	s.Wait()
	for _, id := range []string{"c1", "c2"} {
		if m, _ := state.Open(s.Dir(id)); !m.Current().State.Terminal() {
			t.Errorf("%s never ran: %s", id, m.Current().State)
		}
	}
}
