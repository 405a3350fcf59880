package store

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/agent-runner/agent-runner/job"
)

// lockHelperEnv makes the test binary a second process that opens a store
// (see TestMain): "exclusive:DIR" or "shared:DIR". It prints "locked" or
// the error code, then holds the store until its stdin closes.
const lockHelperEnv = "STORE_LOCK_HELPER"

func TestMain(m *testing.M) {
	if spec := os.Getenv(lockHelperEnv); spec != "" {
		mode, dir, _ := strings.Cut(spec, ":")
		open := Open
		if mode == "shared" {
			open = OpenShared
		}
		if _, err := open(dir); err != nil {
			fmt.Println(job.CodeOf(err), err)
			os.Exit(3)
		}
		fmt.Println("locked")
		bufio.NewReader(os.Stdin).ReadString('\n')
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// holder is another process holding (or failing to take) a store's lock.
type holder struct {
	cmd   *exec.Cmd
	line  string
	stdin interface{ Close() error }
}

func startHolder(t *testing.T, mode, dir string) *holder {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), lockHelperEnv+"="+mode+":"+dir)
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	h := &holder{cmd: cmd, line: strings.TrimSpace(line), stdin: in}
	t.Cleanup(h.stop)
	return h
}

func (h *holder) stop() {
	h.stdin.Close()
	h.cmd.Wait()
}

func TestOpenRefusesAStoreAnotherProcessHolds(t *testing.T) {
	dir := t.TempDir()
	h := startHolder(t, "exclusive", dir)
	if h.line != "locked" {
		t.Fatalf("holder: %s", h.line)
	}
	_, err := Open(dir)
	if got := job.CodeOf(err); got != job.CodeJobConflict {
		t.Fatalf("Open of a held store = %v, want %s", err, job.CodeJobConflict)
	}
	pid := strconv.Itoa(h.cmd.Process.Pid)
	if !strings.Contains(err.Error(), "pid "+pid) || job.AsError(err).Details["pid"] != h.cmd.Process.Pid {
		t.Errorf("error %q (details %v) does not name the owner, pid %s", err, job.AsError(err).Details, pid)
	}
	if _, err := OpenShared(dir); job.CodeOf(err) != job.CodeJobConflict {
		t.Errorf("OpenShared of an exclusively held store = %v, want %s", err, job.CodeJobConflict)
	}
	h.stop()
	s, err := Open(dir)
	if err != nil {
		t.Fatalf("Open after the owner exited: %v", err)
	}
	s.Close()
}

func TestLockModes(t *testing.T) {
	tests := []struct {
		name, other string
		shared      bool
		wantOK      bool
	}{
		{"exclusive then exclusive", "exclusive", false, false},
		{"exclusive then shared", "shared", false, false},
		{"shared then exclusive", "exclusive", true, false},
		{"shared then shared", "shared", true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			open := Open
			if tt.shared {
				open = OpenShared
			}
			s, err := open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			h := startHolder(t, tt.other, dir)
			if got := h.line == "locked"; got != tt.wantOK {
				t.Errorf("second process took the lock = %v (%s), want %v", got, h.line, tt.wantOK)
			}
			if !tt.wantOK && !strings.HasPrefix(h.line, string(job.CodeJobConflict)) {
				t.Errorf("second process said %q, want %s", h.line, job.CodeJobConflict)
			}
		})
	}
}

// TestOpensInOneProcessShareTheLock: tests and doors open several runners
// on one store in one process; the lock goes with the last Close.
func TestOpensInOneProcessShareTheLock(t *testing.T) {
	dir := t.TempDir()
	a, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Open(dir)
	if err != nil {
		t.Fatalf("second Open in the same process: %v", err)
	}
	a.Close()
	a.Close() // a second Close of one Store releases nothing more
	if h := startHolder(t, "exclusive", dir); h.line == "locked" {
		t.Fatal("another process took the lock while b still holds it")
	}
	b.Close()
	if h := startHolder(t, "exclusive", dir); h.line != "locked" {
		t.Errorf("after the last Close another process got %q, want locked", h.line)
	}
}
