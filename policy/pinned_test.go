package policy

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/agent-runner/agent-runner/job"
)

// TestDecidePinnedIdentity: under exec_scope every_process, a command
// whose sha256 is pinned is handed to the backend with the identity of
// the very file hashed, so the backend can refuse a file replaced since;
// a replaced file has another identity. Under argv0 nothing is pinned.
func TestDecidePinnedIdentity(t *testing.T) {
	bin := t.TempDir()
	prog := filepath.Join(bin, "tool")
	if err := os.WriteFile(prog, []byte("\x7fELF one"), 0o755); err != nil {
		t.Fatal(err)
	}
	sum, _, err := fileSHA256(prog)
	if err != nil {
		t.Fatal(err)
	}
	r := req([]string{prog}, job.CommandRule{Basename: "tool", Path: prog, SHA256: sum})
	r.Policy.ExecScope = job.ExecScopeEveryProcess
	d, derr := Decide(r, Config{})
	if derr != nil {
		t.Fatal(derr)
	}
	fi, err := os.Stat(prog)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := d.Pinned[prog], identity(fi); got != want || want.Ino == 0 {
		t.Errorf("Pinned[%s] = %+v, want the hashed file's %+v", prog, got, want)
	}

	// The same bytes written anew (a package upgrade renames a new file
	// into place) are another file.
	next := prog + ".new"
	os.WriteFile(next, []byte("\x7fELF one"), 0o755)
	if err := os.Rename(next, prog); err != nil {
		t.Fatal(err)
	}
	fi, _ = os.Stat(prog)
	if identity(fi) == d.Pinned[prog] {
		t.Errorf("a file renamed into place has the identity %+v of the one it replaced", identity(fi))
	}

	r.Policy.ExecScope = job.ExecScopeArgv0
	if d, _ := Decide(r, Config{}); d.Pinned != nil {
		t.Errorf("exec_scope argv0: Pinned = %+v, want nil", d.Pinned)
	}
}
