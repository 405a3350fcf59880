package stage

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agent-runner/agent-runner/task/manifest"
	"github.com/agent-runner/agent-runner/task/tasktest"
)

// origin makes a repository with two commits on main and a pkg/ subdir.
func origin(t *testing.T) (string, string) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	dir := t.TempDir()
	tasktest.Git(t, dir, "init", "--quiet", "--initial-branch=main")
	os.MkdirAll(filepath.Join(dir, "pkg"), 0o755)
	os.WriteFile(filepath.Join(dir, "pkg", "a.txt"), []byte("one\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "bin.dat"), []byte{0, 1, 2, 255}, 0o644)
	tasktest.Git(t, dir, "add", ".")
	tasktest.Git(t, dir, "commit", "--quiet", "-m", "first")
	first := tasktest.Git(t, dir, "rev-parse", "HEAD")
	os.WriteFile(filepath.Join(dir, "pkg", "a.txt"), []byte("two\n"), 0o644)
	tasktest.Git(t, dir, "commit", "--quiet", "-am", "second")
	return dir, first
}

func task(url, branch, commit, subpath string) *manifest.Task {
	return &manifest.Task{Metadata: manifest.Metadata{ID: "t-1", Name: "Fix it"},
		Repository: manifest.Repository{URL: url, Branch: branch, Commit: commit, Subpath: subpath},
		Claude:     manifest.Claude{Prompt: "Make a.txt say three."}}
}

var fast = Backoff{Base: time.Millisecond, Max: 4 * time.Millisecond, Attempts: 3}

func TestStageLayoutAndPatchRoundTrip(t *testing.T) {
	src, _ := origin(t)
	for _, url := range []string{src, "file://" + src} {
		l := Layout{Dir: taskDir(t)}
		tk := task(url, "main", "", "")
		if err := Stage(context.Background(), l, tk, []byte("version: \"1\"\n"), fast); err != nil {
			t.Fatalf("%s: %v", url, err)
		}
		for _, p := range []string{l.Manifest(), filepath.Join(l.Progress(), "stdout.log"), filepath.Join(l.Progress(), "stderr.log"), filepath.Join(l.Inbox(), "TASK.md"), l.Artifacts()} {
			if _, err := os.Stat(p); err != nil {
				t.Errorf("missing %s", p)
			}
		}
		if b, _ := os.ReadFile(filepath.Join(l.Inbox(), "TASK.md")); !strings.Contains(string(b), "Make a.txt say three.") {
			t.Errorf("TASK.md = %q", b)
		}
		// The "agent" edits, adds a text and a binary file.
		os.WriteFile(filepath.Join(l.Inbox(), "pkg", "a.txt"), []byte("three\n"), 0o644)
		os.WriteFile(filepath.Join(l.Inbox(), "new.txt"), []byte("added\n"), 0o644)
		os.WriteFile(filepath.Join(l.Inbox(), "new.bin"), []byte{9, 0, 8}, 0o644)
		arts, err := collect(t, l, tk)
		if err != nil {
			t.Fatal(err)
		}
		if len(arts) != 2 || arts[0].Name != "t-1.patch" || arts[0].SHA256 == "" {
			t.Fatalf("artifacts = %+v", arts)
		}
		untracked, _ := os.ReadFile(filepath.Join(l.Artifacts(), "t-1-untracked.txt"))
		if string(untracked) != "new.bin\nnew.txt\n" {
			t.Errorf("untracked = %q (TASK.md must not be listed)", untracked)
		}
		// The patch applies cleanly to a fresh clone of the original.
		check := t.TempDir()
		tasktest.Git(t, check, "clone", "--quiet", src, ".")
		tasktest.Git(t, check, "apply", "--binary", filepath.Join(l.Artifacts(), "t-1.patch"))
		if b, _ := os.ReadFile(filepath.Join(check, "pkg", "a.txt")); string(b) != "three\n" {
			t.Errorf("patched a.txt = %q", b)
		}
		if b, _ := os.ReadFile(filepath.Join(check, "new.bin")); string(b) != "\x09\x00\x08" {
			t.Errorf("patched new.bin = %q", b)
		}
		if _, err := os.Stat(filepath.Join(check, "TASK.md")); err == nil {
			t.Error("TASK.md leaked into the patch")
		}
	}
}

func TestStageCommitAndSubpath(t *testing.T) {
	src, first := origin(t)
	l := Layout{Dir: t.TempDir()}
	tk := task(src, "main", first, "pkg")
	if err := Stage(context.Background(), l, tk, nil, fast); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(l.Workdir(tk), "a.txt")); string(b) != "one\n" {
		t.Errorf("pinned commit not checked out: %q", b)
	}
	if _, err := os.Stat(filepath.Join(l.Workdir(tk), "TASK.md")); err != nil {
		t.Error("TASK.md not in the subpath workdir")
	}
	if err := Stage(context.Background(), Layout{Dir: t.TempDir()}, task(src, "main", "", "nope"), nil, fast); err == nil {
		t.Error("a missing subpath was accepted")
	}
}

func TestPermanentErrorsAreNotRetried(t *testing.T) {
	src, _ := origin(t)
	start := time.Now()
	slow := Backoff{Base: time.Second, Max: time.Second, Attempts: 3}
	err := Stage(context.Background(), Layout{Dir: t.TempDir()}, task(src, "no-such-branch", "", ""), nil, slow)
	if err == nil || TransientGitError(err) {
		t.Fatalf("missing branch = %v, want a permanent error", err)
	}
	if time.Since(start) > 900*time.Millisecond {
		t.Error("a permanent error was retried")
	}
}

func TestRetryCounts(t *testing.T) {
	calls := 0
	err := fast.Retry(context.Background(), func() error { calls++; return errors.New("fatal: unable to access 'x': Could not resolve host: x") }, TransientGitError)
	if err == nil || calls != 3 {
		t.Errorf("transient: %d calls, %v; want 3 attempts", calls, err)
	}
	calls = 0
	fast.Retry(context.Background(), func() error { calls++; return errors.New("remote: Repository not found.") }, TransientGitError)
	if calls != 1 {
		t.Errorf("permanent: %d calls, want 1", calls)
	}
	calls = 0
	fast.Retry(context.Background(), func() error {
		calls++
		if calls < 2 {
			return errors.New("connection reset by peer")
		}
		return nil
	}, TransientGitError)
	if calls != 2 {
		t.Errorf("recovering: %d calls, want 2", calls)
	}
}

func TestDelayBoundsAndJitter(t *testing.T) {
	b := CloneBackoff
	wantMax := []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second, 20 * time.Second}
	for i, max := range wantMax {
		n := i + 1
		if lo, hi := b.Delay(n, 0), b.Delay(n, 0.999999); lo != max/2 || hi > max || hi < max*99/100 {
			t.Errorf("Delay(%d) in [%v, %v], want [%v, %v]", n, lo, hi, max/2, max)
		}
	}
}

func TestTransientClassification(t *testing.T) {
	tests := map[string]bool{
		"fatal: unable to access 'https://x/': Could not resolve host: x": true,
		"error: RPC failed; curl 56 GnuTLS recv error":                    true,
		"fatal: the remote end hung up unexpectedly":                      true,
		"fatal: early EOF":                                                                   true,
		"remote: Repository not found.":                                                      false,
		"fatal: Authentication failed for 'https://x/'":                                      false,
		"fatal: Remote branch nope not found in upstream origin":                             false,
		"git@github.com: Permission denied (publickey).":                                     false,
		"fatal: could not read Username for 'https://github.com': terminal prompts disabled": false,
	}
	for msg, want := range tests {
		if got := TransientGitError(errors.New(msg)); got != want {
			t.Errorf("TransientGitError(%q) = %v, want %v", msg, got, want)
		}
	}
}

// TestCollectNeverRunsTheAgentsGitConfig: the agent owns inbox/.git, so it
// can name commands in its config (filters, diff drivers, fsmonitor,
// external diff) and attributes that select them. None of those commands
// may run, and the patch must still hold the change.
func TestCollectNeverRunsTheAgentsGitConfig(t *testing.T) {
	src, _ := origin(t)
	l := Layout{Dir: taskDir(t)}
	tk := task(src, "main", "", "")
	if err := Stage(context.Background(), l, tk, nil, fast); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(t.TempDir(), "pwned")
	cmd := "sh -c 'echo $0 >> " + marker + "'"
	f, _ := os.OpenFile(filepath.Join(l.Inbox(), ".git", "config"), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("[core]\n\tfsmonitor = " + cmd + "\n\thooksPath = /tmp\n\tpager = " + cmd + "\n" +
		"[filter \"evil\"]\n\tclean = " + cmd + "\n\tsmudge = " + cmd + "\n\tprocess = " + cmd + "\n" +
		"[diff \"evil\"]\n\ttextconv = " + cmd + "\n\tcommand = " + cmd + "\n" +
		"[diff]\n\texternal = " + cmd + "\n")
	f.Close()
	os.WriteFile(filepath.Join(l.Inbox(), ".gitattributes"), []byte("* filter=evil diff=evil\n"), 0o644)
	os.WriteFile(filepath.Join(l.Inbox(), "pkg", "a.txt"), []byte("three\n"), 0o644)
	os.WriteFile(filepath.Join(l.Inbox(), "new.txt"), []byte("new\n"), 0o644)
	// A commit the agent made is part of the change too.
	os.WriteFile(filepath.Join(l.Inbox(), "bin.dat"), []byte{9, 9}, 0o644)
	arts, err := collect(t, l, tk)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(marker); err == nil {
		t.Fatalf("the agent's git config ran on the host: %q", b)
	}
	patch, _ := os.ReadFile(filepath.Join(l.Artifacts(), arts[0].Name))
	for _, want := range []string{"+three", "new.txt", "bin.dat", ".gitattributes"} {
		if !strings.Contains(string(patch), want) {
			t.Errorf("patch lacks %q:\n%s", want, patch)
		}
	}
	// The patch still applies to the original repository.
	check := t.TempDir()
	tasktest.Git(t, check, "clone", "--quiet", src, ".")
	tasktest.Git(t, check, "apply", filepath.Join(l.Artifacts(), arts[0].Name))
	if b, _ := os.ReadFile(filepath.Join(check, "pkg", "a.txt")); string(b) != "three\n" {
		t.Errorf("patched a.txt = %q", b)
	}
}

// TestCollectIncludesTheAgentsCommits: the patch is against the staged
// commit, so changes the agent committed are not lost.
func TestCollectIncludesTheAgentsCommits(t *testing.T) {
	src, _ := origin(t)
	l := Layout{Dir: taskDir(t)}
	tk := task(src, "main", "", "")
	if err := Stage(context.Background(), l, tk, nil, fast); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(l.Inbox(), "pkg", "a.txt"), []byte("committed\n"), 0o644)
	tasktest.Git(t, l.Inbox(), "commit", "--quiet", "-am", "agent commit")
	arts, err := collect(t, l, tk)
	if err != nil {
		t.Fatal(err)
	}
	if patch, _ := os.ReadFile(filepath.Join(l.Artifacts(), arts[0].Name)); !strings.Contains(string(patch), "+committed") {
		t.Errorf("committed change missing:\n%s", patch)
	}
}

// TestQuotaWorkspaceSurvivesAnUnmount: after a host reboot the image is
// mounted again, with its files; removal unmounts and deletes it all.
func TestQuotaWorkspaceSurvivesAnUnmount(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("loop mounts need root")
	}
	l := Layout{Dir: t.TempDir()}
	if err := MountQuota(context.Background(), l, 32<<20); err != nil {
		t.Skipf("no loop mount here: %v", err)
	}
	t.Cleanup(func() { RemoveWorkspace(l) })
	if entries, _ := os.ReadDir(l.Inbox()); len(entries) != 0 {
		t.Errorf("fresh workspace is not empty: %v", entries)
	}
	os.WriteFile(filepath.Join(l.Inbox(), "kept.txt"), []byte("x"), 0o644)
	if out, err := exec.Command("umount", l.Inbox()).CombinedOutput(); err != nil {
		t.Fatalf("umount: %v %s", err, out)
	}
	if Mounted(l) {
		t.Fatal("still mounted")
	}
	if err := Remount(context.Background(), l); err != nil || !Mounted(l) {
		t.Fatalf("Remount = %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(l.Inbox(), "kept.txt")); err != nil || string(b) != "x" {
		t.Errorf("file after remount = %q %v", b, err)
	}
	if err := RemoveWorkspace(l); err != nil || Mounted(l) {
		t.Errorf("RemoveWorkspace = %v, mounted %v", err, Mounted(l))
	}
	if err := MountQuota(context.Background(), Layout{Dir: t.TempDir()}, 1<<20); err == nil {
		t.Error("a 1 MiB quota was accepted")
	}
}

// TestStageNeverSharesTheOriginsFiles: a local origin is cloned without
// hardlinks. With them, the clone's objects were the origin's inodes: the
// sandbox staging chowned the origin's objects, and an agent could append
// to them and corrupt the host repository.
func TestStageNeverSharesTheOriginsFiles(t *testing.T) {
	src, _ := origin(t)
	l := Layout{Dir: taskDir(t)}
	if err := Stage(context.Background(), l, task(src, "main", "", ""), nil, fast); err != nil {
		t.Fatal(err)
	}
	originObjects := map[string]os.FileInfo{}
	filepath.WalkDir(filepath.Join(src, ".git", "objects"), func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := os.Stat(p); err == nil {
				originObjects[p] = fi
			}
		}
		return nil
	})
	if len(originObjects) == 0 {
		t.Fatal("the origin has no object files to compare")
	}
	filepath.WalkDir(l.Inbox(), func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		fi, err := os.Stat(p)
		if err != nil {
			return nil
		}
		for op, ofi := range originObjects {
			if os.SameFile(fi, ofi) {
				t.Errorf("staged %s is the origin's %s (a hardlink)", p, op)
			}
		}
		return nil
	})
}
