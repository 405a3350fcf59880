package store

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agent-runner/agent-runner/job"
)

// lockHelperEnv makes the test binary a second process that uses a store
// (see TestMain): "own:DIR" takes ownership, "run:DIR:ID" locks a run. It
// prints "locked" or the error, then holds it until its stdin closes.
const lockHelperEnv = "STORE_LOCK_HELPER"

func TestMain(m *testing.M) {
	if spec := os.Getenv(lockHelperEnv); spec != "" {
		parts := strings.SplitN(spec, ":", 3)
		s, err := Open(parts[1])
		if err == nil {
			if parts[0] == "own" {
				err = s.Own()
			} else {
				_, err = s.LockRun(context.Background(), parts[2], false)
			}
		}
		if err != nil {
			fmt.Println(job.CodeOf(err), err)
			os.Exit(3)
		}
		fmt.Println("locked")
		bufio.NewReader(os.Stdin).ReadString('\n')
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// holder is another process holding (or failing to take) a lock.
type holder struct {
	cmd   *exec.Cmd
	line  string
	stdin interface{ Close() error }
	// stopped makes stop safe to call twice at once (a test's goroutine
	// and its cleanup): exec.Cmd.Wait is not.
	stopped sync.Once
}

func startHolder(t *testing.T, spec string) *holder {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), lockHelperEnv+"="+spec)
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
	h.stopped.Do(func() {
		h.stdin.Close()
		h.cmd.Wait()
	})
}

// TestOpenBesideAnOwner: any number of processes use a store another
// process owns (run, replay and mcp beside serve).
func TestOpenBesideAnOwner(t *testing.T) {
	dir := t.TempDir()
	h := startHolder(t, "own:"+dir)
	if h.line != "locked" {
		t.Fatalf("holder: %s", h.line)
	}
	s, err := Open(dir)
	if err != nil {
		t.Fatalf("Open of an owned store: %v", err)
	}
	defer s.Close()
	if _, err := s.Claim(job.Request{JobID: "job_a"}, StatusRecord{}); err != nil {
		t.Errorf("Claim beside an owner: %v", err)
	}
}

func TestOwnRefusesAStoreAnotherProcessOwns(t *testing.T) {
	dir := t.TempDir()
	h := startHolder(t, "own:"+dir)
	if h.line != "locked" {
		t.Fatalf("holder: %s", h.line)
	}
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	err = s.Own()
	if got := job.CodeOf(err); got != job.CodeJobConflict {
		t.Fatalf("Own of an owned store = %v, want %s", err, job.CodeJobConflict)
	}
	pid := strconv.Itoa(h.cmd.Process.Pid)
	if !strings.Contains(err.Error(), "pid "+pid) || job.AsError(err).Details["pid"] != h.cmd.Process.Pid {
		t.Errorf("error %q (details %v) does not name the owner, pid %s", err, job.AsError(err).Details, pid)
	}
	h.stop()
	s2, _ := Open(dir)
	if err := s2.Own(); err != nil {
		t.Fatalf("Own after the owner exited: %v", err)
	}
	s2.Close()
}

// TestOwnersInOneProcessShareTheLock: tests and doors open several
// runners on one store in one process; ownership goes with the last Close.
func TestOwnersInOneProcessShareTheLock(t *testing.T) {
	dir := t.TempDir()
	a, _ := Open(dir)
	b, _ := Open(dir)
	if err := a.Own(); err != nil {
		t.Fatal(err)
	}
	if err := b.Own(); err != nil {
		t.Fatalf("second Own in the same process: %v", err)
	}
	a.Close()
	a.Close() // a second Close of one Store releases nothing more
	if h := startHolder(t, "own:"+dir); h.line == "locked" {
		t.Fatal("another process took ownership while b still holds it")
	}
	b.Close()
	if h := startHolder(t, "own:"+dir); h.line != "locked" {
		t.Errorf("after the last Close another process got %q, want locked", h.line)
	}
}

func TestLockRunAcrossProcesses(t *testing.T) {
	dir := t.TempDir()
	s, _ := Open(dir)
	h := startHolder(t, "run:"+dir+":job_x")
	if h.line != "locked" {
		t.Fatalf("holder: %s", h.line)
	}
	if !s.RunLocked("job_x") {
		t.Error("RunLocked = false while another process executes it")
	}
	if _, err := s.LockRun(context.Background(), "job_x", false); !errors.Is(err, ErrRunLocked) {
		t.Errorf("LockRun without wait = %v, want ErrRunLocked", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := s.LockRun(ctx, "job_x", true); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("LockRun waiting past ctx = %v, want the deadline", err)
	}
	go func() { time.Sleep(50 * time.Millisecond); h.stop() }()
	unlock, err := s.LockRun(context.Background(), "job_x", true)
	if err != nil {
		t.Fatalf("LockRun after the holder exited: %v", err)
	}
	unlock()
	if s.RunLocked("job_x") {
		t.Error("RunLocked = true after unlock")
	}
}
