package stage

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/backend/linuxsandbox"
	"github.com/agent-runner/agent-runner/backend/localprocess"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/safecopy"
	"github.com/agent-runner/agent-runner/task/manifest"
	"github.com/agent-runner/agent-runner/task/tasktest"
)

func TestMain(m *testing.M) {
	linuxsandbox.MaybeInit()
	os.Exit(m.Run())
}

// taskDir is a task directory the sandbox's uid can reach (its ancestors
// searchable, as a task store's are).
func taskDir(t *testing.T) string {
	d := t.TempDir()
	for _, p := range []string{filepath.Dir(d), d} {
		os.Chmod(p, 0o755)
	}
	return d
}

// collect runs Collect on the test backend with the default limits.
func collect(t *testing.T, l Layout, tk *manifest.Task) ([]Artifact, error) {
	return Collect(context.Background(), l, tk, tasktest.Backend(t), CollectLimits{}, nil)
}

// sandbox is linux_sandbox; the regression tests below are about running
// git there and skip, saying why, where it cannot run.
func sandbox(t *testing.T) backend.Backend {
	b, err := linuxsandbox.New(backend.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Available(context.Background()); err != nil {
		t.Skipf("linux_sandbox unavailable: %v", err)
	}
	return b
}

// staged stages origin(t) into a fresh task directory.
func staged(t *testing.T) (Layout, *manifest.Task, string) {
	src, _ := origin(t)
	l := Layout{Dir: taskDir(t)}
	tk := task(src, "main", "", "")
	if err := Stage(context.Background(), l, tk, nil, fast); err != nil {
		t.Fatal(err)
	}
	return l, tk, src
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// evilConfig is git config naming a command, through every key that
// makes git run one, that touches <marker>-<key> on the host.
func evilConfig(marker, include string) string {
	run := func(key string) string { return "touch " + marker + "-" + key }
	return "[core]\n\tfsmonitor = " + run("fsmonitor") + "\n\thooksPath = " + filepath.Dir(marker) +
		"\n\tpager = " + run("pager") + "\n\tsshCommand = " + run("ssh") + "\n" +
		"[filter \"evil\"]\n\tclean = " + run("clean") + "\n\tsmudge = " + run("smudge") + "\n\tprocess = " + run("process") + "\n\trequired = true\n" +
		"[diff \"evil\"]\n\ttextconv = " + run("textconv") + "\n\tcommand = " + run("diffcmd") + "\n" +
		"[diff]\n\texternal = " + run("external") + "\n" +
		"[include]\n\tpath = " + include + "\n"
}

// ranOnHost lists the markers the agent's commands left on the host.
func ranOnHost(t *testing.T, marker string) []string {
	got, err := filepath.Glob(marker + "*")
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestCollectTopLevelConfigRunsNothing: the agent's .git/config (and a
// file it includes) and a .gitattributes naming filter and diff drivers.
// The old host-side collection already ignored inbox/.git (base.git was
// its repository), so this never ran a command there either; it guards
// that no command runs now that git runs in the sandbox, and that the
// patch is still made.
func TestCollectTopLevelConfigRunsNothing(t *testing.T) {
	b := sandbox(t)
	l, tk, _ := staged(t)
	marker := filepath.Join(t.TempDir(), "ran")
	included := filepath.Join(l.Inbox(), "more.cfg")
	write(t, included, evilConfig(marker+"-included", "/dev/null"))
	f, err := os.OpenFile(filepath.Join(l.Inbox(), ".git", "config"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(evilConfig(marker, included))
	f.Close()
	write(t, filepath.Join(l.Inbox(), ".gitattributes"), "* filter=evil diff=evil\n")
	write(t, filepath.Join(l.Inbox(), ".gitmodules"), "[submodule \"x\"]\n\tpath = x\n\turl = ../x\n\tupdate = !"+"touch "+marker+"-update\n")
	write(t, filepath.Join(l.Inbox(), "pkg", "a.txt"), "three\n")
	write(t, filepath.Join(l.Inbox(), "new.txt"), "new\n")
	arts, err := Collect(context.Background(), l, tk, b, CollectLimits{}, nil)
	if got := ranOnHost(t, marker); len(got) > 0 {
		t.Fatalf("the agent's git config ran on the host: %v", got)
	}
	if err != nil {
		t.Fatal(err)
	}
	patch, _ := os.ReadFile(filepath.Join(l.Artifacts(), arts[0].Name))
	for _, want := range []string{"+three", "new.txt", ".gitattributes", ".gitmodules"} {
		if !strings.Contains(string(patch), want) {
			t.Errorf("patch lacks %q:\n%s", want, patch)
		}
	}
}

// TestCollectNestedRepositoriesRunNothing: a repository inside the inbox
// (its .git a directory, or a gitfile pointing at a host directory
// outside the inbox) with config naming commands, a .gitattributes
// selecting them and a file whose stat changed, so that `git status` in
// it must filter the file; a .gitmodules beside. The old host-side
// collection ran `git status` in the nested repository (to mark its
// gitlink -dirty), and with it the repository's filter: as root, on the
// host. Both cases fail there (marker ran-process appears).
func TestCollectNestedRepositoriesRunNothing(t *testing.T) {
	b := sandbox(t)
	tests := []struct {
		name    string
		gitArgs func(hostDir string) []string
	}{
		{"git directory", func(string) []string { return nil }},
		{"gitfile to a host path", func(hostDir string) []string {
			return []string{"--separate-git-dir", filepath.Join(hostDir, "sub.git")}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, tk, _ := staged(t)
			hostDir := t.TempDir()
			marker := filepath.Join(hostDir, "ran")
			sub := filepath.Join(l.Inbox(), "sub")
			write(t, filepath.Join(sub, "f.txt"), "x\n")
			tasktest.Git(t, sub, append([]string{"init", "--quiet"}, tt.gitArgs(hostDir)...)...)
			tasktest.Git(t, sub, "add", "f.txt")
			tasktest.Git(t, sub, "commit", "--quiet", "-m", "nested")
			gitDir := tasktest.Git(t, sub, "rev-parse", "--absolute-git-dir")
			f, err := os.OpenFile(filepath.Join(gitDir, "config"), os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteString(evilConfig(marker, "/dev/null"))
			f.Close()
			write(t, filepath.Join(sub, ".gitattributes"), "* filter=evil diff=evil\n")
			old := time.Now().Add(-time.Hour)
			os.Chtimes(filepath.Join(sub, "f.txt"), old, old)
			write(t, filepath.Join(l.Inbox(), ".gitmodules"), "[submodule \"sub\"]\n\tpath = sub\n\turl = ../sub\n")
			write(t, filepath.Join(l.Inbox(), "new.txt"), "new\n")
			arts, err := Collect(context.Background(), l, tk, b, CollectLimits{}, nil)
			if got := ranOnHost(t, marker); len(got) > 0 {
				t.Fatalf("a nested repository's config ran on the host: %v", got)
			}
			if err != nil {
				t.Fatal(err)
			}
			patch, _ := os.ReadFile(filepath.Join(l.Artifacts(), arts[0].Name))
			for _, want := range []string{"new.txt", ".gitmodules", "sub"} {
				if !strings.Contains(string(patch), want) {
					t.Errorf("patch lacks %q:\n%s", want, patch)
				}
			}
		})
	}
}

// TestCollectBigOutputsFailClearly: a new 8 GiB sparse file, a modified
// file too big for git's memory, and a patch over the cap (no one file
// over it: git is stopped by the file-size limit and the host reads cap+1
// bytes) all end in a clear error, with no patch kept. The host reads no
// more than the cap of any output (TestReadAtMostCountsBytesRead). On the
// old host-side code all three "succeeded": the 8 GiB file took 67 s of
// host git (no command ran, but no limit held) and every patch was read
// whole into the runner's memory.
func TestCollectBigOutputsFailClearly(t *testing.T) {
	b := sandbox(t)
	random := make([]byte, 8<<15)
	rand.Read(random)
	tests := []struct {
		name    string
		plant   func(inbox string) error
		lim     CollectLimits
		wantMsg string
	}{
		{"new sparse 8 GiB", func(inbox string) error { return sparse(filepath.Join(inbox, "huge.bin"), 8<<30) },
			CollectLimits{}, "over the 104857600-byte collection cap; no patch was kept (new file over the 104857600-byte collection cap: huge.bin)"},
		{"modified file over git's memory", func(inbox string) error { return sparse(filepath.Join(inbox, "pkg", "a.txt"), 256<<20) },
			CollectLimits{MemoryBytes: 128 << 20}, "mmap failed, check sys.vm.max_map_count and/or RLIMIT_DATA: Cannot allocate memory"},
		{"patch over the cap, no file over it", func(inbox string) error {
			for i := range 8 {
				if err := os.WriteFile(filepath.Join(inbox, fmt.Sprintf("random%d.bin", i)), random[i<<15:(i+1)<<15], 0o644); err != nil {
					return err
				}
			}
			return nil
		}, CollectLimits{MaxBytes: 64 << 10}, "over the 65536-byte collection cap; no patch was kept"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, tk, _ := staged(t)
			if err := tt.plant(l.Inbox()); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			arts, err := Collect(context.Background(), l, tk, b, tt.lim, nil)
			t.Logf("took %v: %v", time.Since(start), err)
			if got, want := job.CodeOf(err), job.CodeArtifactFailed; got != want || !strings.HasSuffix(err.Error(), tt.wantMsg) {
				t.Fatalf("Collect = %v, %v; want %s ending %q", arts, err, want, tt.wantMsg)
			}
			if _, err := os.Stat(filepath.Join(l.Artifacts(), tk.Metadata.ID+".patch")); err == nil {
				t.Error("a patch was kept")
			}
		})
	}
}

func sparse(path string, size int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Truncate(size)
}

// TestCollectTimesOut: git hashing a tracked file grown to 8 GiB takes
// a minute or more; a 300 ms collection timeout ends it with a clear
// error instead. The old code had no timeout: there this test took 2 min
// and the patch was made.
func TestCollectTimesOut(t *testing.T) {
	b := sandbox(t)
	l, tk, _ := staged(t)
	if err := sparse(filepath.Join(l.Inbox(), "pkg", "a.txt"), 8<<30); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err := Collect(context.Background(), l, tk, b, CollectLimits{Timeout: 300 * time.Millisecond}, nil)
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("Collect took %v with a 300ms timeout", took)
	}
	if got, want := job.CodeOf(err), job.CodeArtifactFailed; got != want || !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("Collect = %v, want %s saying it timed out", err, want)
	}
}

// tamperer runs the collection on b, then runs tail in the same sandbox
// (appended to the collection script, as whatever git ran there could
// do) and records what the output files are when the sandbox ends.
type tamperer struct {
	b     backend.Backend
	tail  string
	modes map[string]os.FileMode
}

func (x *tamperer) Kind() string                        { return x.b.Kind() }
func (x *tamperer) Capabilities() backend.Capabilities  { return x.b.Capabilities() }
func (x *tamperer) Available(ctx context.Context) error { return x.b.Available(ctx) }
func (x *tamperer) Run(ctx context.Context, spec backend.Spec) (backend.Outcome, error) {
	spec.Argv = append([]string{}, spec.Argv...)
	spec.Argv[2] += "\n" + x.tail + "\n"
	out, err := x.b.Run(ctx, spec)
	x.modes = map[string]os.FileMode{}
	for _, name := range []string{"patch", "untracked"} {
		if fi, err := os.Lstat(filepath.Join(spec.Writable[0], name)); err == nil {
			x.modes[name] = fi.Mode().Type()
		}
	}
	return out, err
}

// TestCollectRefusesOutputsThatAreNotFiles: the sandbox can replace its
// outputs with a FIFO (a blocking read on the host) or a symlink to a
// host file. The host refuses both at once. (The old code read git's
// stdout, not files, so had no such step; nothing ran on the host here.)
func TestCollectRefusesOutputsThatAreNotFiles(t *testing.T) {
	b := sandbox(t)
	secret := filepath.Join(taskDir(t), "secret")
	write(t, secret, "host secret\n")
	tests := []struct {
		name, tail string
		file       string
		want       os.FileMode
	}{
		{"patch fifo", `rm -f "$2/patch" && mkfifo "$2/patch"`, "patch", os.ModeNamedPipe},
		{"untracked fifo", `rm -f "$2/untracked" && mkfifo "$2/untracked"`, "untracked", os.ModeNamedPipe},
		{"patch symlink", `ln -sf ` + secret + ` "$2/patch"`, "patch", os.ModeSymlink},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, tk, _ := staged(t)
			write(t, filepath.Join(l.Inbox(), "new.txt"), "new\n")
			x := &tamperer{b: b, tail: tt.tail}
			start := time.Now()
			_, err := Collect(context.Background(), l, tk, x, CollectLimits{}, nil)
			if got := x.modes[tt.file]; got != tt.want {
				t.Fatalf("the sandbox left %s as %v, want %v (the tampering did not happen)", tt.file, got, tt.want)
			}
			if took := time.Since(start); took > 10*time.Second {
				t.Errorf("Collect took %v", took)
			}
			if got, want := job.CodeOf(err), job.CodeArtifactFailed; got != want {
				t.Fatalf("Collect = %v, want %s", err, want)
			}
			if b, err := os.ReadFile(filepath.Join(l.Artifacts(), tk.Metadata.ID+".patch")); err == nil {
				t.Errorf("a patch was kept: %q", b)
			}
		})
	}
}

// TestReadOutputsRefusesNonFilesAndCaps: without the sandbox, what the
// host does with outputs it finds: a FIFO no one writes (it must not
// block), a symlink and a directory are refused, a file over the cap is
// ErrTooLarge.
func TestReadOutputsRefusesNonFilesAndCaps(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "file"), "ok")
	write(t, filepath.Join(dir, "big"), strings.Repeat("x", 11))
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Symlink(filepath.Join(dir, "file"), filepath.Join(dir, "link"))
	os.Mkdir(filepath.Join(dir, "dir"), 0o755)
	names := []string{"file", "big", "fifo", "link", "dir"}
	done := make(chan struct{})
	var bufs [][]byte
	var errs []error
	go func() { bufs, errs = readOutputs(context.Background(), dir, 10, names...); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("readOutputs blocked")
	}
	if string(bufs[0]) != "ok" || errs[0] != nil {
		t.Errorf("readOutputs(file) = %q, %v; want ok", bufs[0], errs[0])
	}
	if !errors.Is(errs[1], safecopy.ErrTooLarge) {
		t.Errorf("readOutputs(11 bytes, cap 10) = %v, want ErrTooLarge", errs[1])
	}
	for i, name := range names[2:] {
		if errs[i+2] == nil {
			t.Errorf("readOutputs(%s) read it, want a refusal", name)
		}
	}
}

// TestCollectOnLocalProcess: an operator's local_process choice collects
// there, with the same patch.
func TestCollectOnLocalProcess(t *testing.T) {
	l, tk, src := staged(t)
	write(t, filepath.Join(l.Inbox(), "pkg", "a.txt"), "three\n")
	write(t, filepath.Join(l.Inbox(), "new.txt"), "new\n")
	arts, err := Collect(context.Background(), l, tk, localprocess.Backend{}, CollectLimits{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	check := t.TempDir()
	tasktest.Git(t, check, "clone", "--quiet", src, ".")
	tasktest.Git(t, check, "apply", "--binary", filepath.Join(l.Artifacts(), arts[0].Name))
	if b, _ := os.ReadFile(filepath.Join(check, "new.txt")); string(b) != "new\n" {
		t.Errorf("patched new.txt = %q", b)
	}
}

func TestTailBufferKeepsTheEnd(t *testing.T) {
	w := &tailBuffer{max: 8}
	for _, p := range []string{"warning: one\n", "warning: two\n", "fatal: x"} {
		w.Write([]byte(p))
	}
	if got, want := w.String(), "fatal: x"; got != want {
		t.Errorf("tailBuffer = %q, want %q", got, want)
	}
}
