package taskstore

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/task/lifecycle"
	"github.com/agent-runner/agent-runner/workspaceroot"
)

// TestSubmitMeetsTheOperatorsRules: tasks and children are held to the
// workspace roots and the secrets file at submit, and a child cannot run
// more children at once than its parent. The parent here was recorded
// before those rules (its repository lies outside the roots, it names an
// unregistered secret); the old store accepted its children, and any task
// naming /etc or the store.
func TestSubmitMeetsTheOperatorsRules(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "root")
	store := filepath.Join(root, "store")
	os.MkdirAll(filepath.Join(root, "repo"), 0o755)
	s, err := New(filepath.Join(store, "tasks"), lifecycle.Config{Roots: &workspaceroot.Roots{Dirs: []string{root}, Excluded: []string{store}}})
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(s.Dir("other"), 0o755)
	// childDoc's repository is /srv/repo: outside the roots.
	record(t, s, "p", "", string(childDoc("p", "children: {max_concurrent: 2}\n")))
	record(t, s, "ps", "", replaceRepo(childDoc("ps", "secrets: [{name: K, source: env, key: HOME}]\nchildren: {}\n"), filepath.Join(root, "repo")))
	tests := []struct {
		name   string
		parent string // "" submits a top-level task
		doc    []byte
		code   job.Code
	}{
		{"task repo outside the roots", "", childDoc("t1", ""), job.CodePathEscape},
		{"task repo file URL into the store", "", []byte(replaceRepo(childDoc("t2", ""), "file://"+s.Dir("other"))), job.CodePathEscape},
		{"task secret without a secrets file", "", []byte(replaceRepo(childDoc("t3", "secrets: [{name: K, source: env, key: HOME}]\n"), filepath.Join(root, "repo"))), job.CodeForbidden},
		{"child with its parent's repo outside the roots", "p", childDoc("c1", ""), job.CodePathEscape},
		{"child with its parent's unregistered secret", "ps", []byte(replaceRepo(childDoc("c2", "secrets: [{name: K, source: env, key: HOME}]\n"), filepath.Join(root, "repo"))), job.CodeForbidden},
		{"child with more concurrent children than its parent", "p", childDoc("c3", "children: {max_concurrent: 3}\n"), job.CodeForbidden},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			if tt.parent == "" {
				_, err = s.Submit(tt.doc)
			} else {
				_, err = s.SubmitChild(tt.parent, tt.doc)
			}
			if got := job.CodeOf(err); got != tt.code {
				t.Errorf("submit = %v, want %s", err, tt.code)
			}
		})
	}
	s.Wait()
}

// TestChildMaxConcurrentWithinItsParent: a child may declare as many
// concurrent children as its parent, or fewer, and inherits the parent's
// when it leaves the number out.
func TestChildMaxConcurrentWithinItsParent(t *testing.T) {
	for _, tt := range []struct {
		parent, child string
		code          job.Code
	}{
		{"children: {max_concurrent: 2}\n", "children: {max_concurrent: 3}\n", job.CodeForbidden},
		{"children: {}\n", "children: {max_concurrent: 6}\n", job.CodeForbidden}, // the parent's default is 5
		{"children: {max_concurrent: 2}\n", "children: {max_concurrent: 2}\n", ""},
		{"children: {max_concurrent: 2}\n", "children: {}\n", ""},
		{"children: {max_concurrent: 2}\n", "", ""},
	} {
		s, _ := New(t.TempDir(), lifecycle.Config{})
		record(t, s, "p", "", string(childDoc("p", tt.parent)))
		id, err := s.SubmitChild("p", childDoc("c", tt.child))
		if got := job.CodeOf(err); got != tt.code {
			t.Errorf("parent %q, child %q: SubmitChild = %v, want %q", tt.parent, tt.child, err, tt.code)
		}
		s.Wait()
		if err == nil && tt.child == "children: {}\n" {
			if m, _ := s.manifest(id); m == nil || m.Children.MaxConcurrent != 2 {
				t.Errorf("stored child children = %+v, want the parent's max_concurrent 2", m)
			}
		}
	}
}

func replaceRepo(doc []byte, url string) string {
	return strings.Replace(string(doc), "url: /srv/repo", "url: \""+url+"\"", 1)
}
