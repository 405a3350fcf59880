package backendtest

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agent-runner/agent-runner/backend"
)

// ttyChildEnv marks the re-executed test binary that runs the job under a
// controlling terminal.
const ttyChildEnv = "AGENT_RUNNER_TTY_CHILD"

// noControllingTerminal runs a job from a child of the test whose
// controlling terminal is a pty, as `agent-runner run` typed in a
// terminal is, and checks that nothing the job writes to /dev/tty reaches
// that terminal (the job must run in a session of its own).
func noControllingTerminal(t *testing.T, b backend.Backend) {
	if os.Getenv(ttyChildEnv) == t.Name() {
		spec, out, errb := Spec(t, "/bin/sh", "-c", "echo INJECTED > /dev/tty && echo OPENED || echo NOTTY")
		run(t, b, spec)
		fmt.Printf("CHILD-DONE %q %q\n", out.String(), errb.String())
		return
	}
	master, slave := openPTY(t)
	cmd := exec.Command(os.Args[0], "-test.run="+runPattern(t.Name()), "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), ttyChildEnv+"="+t.Name())
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	var seen bytes.Buffer
	copied := make(chan struct{})
	go func() { io.Copy(&seen, master); close(copied) }()
	cmd.Wait()
	master.Close()
	<-copied
	if !strings.Contains(seen.String(), "CHILD-DONE") {
		t.Fatalf("the child did not run the job: %q", seen.String())
	}
	if strings.Contains(seen.String(), "INJECTED") || !strings.Contains(seen.String(), "NOTTY") {
		t.Errorf("the job reached the operator's terminal (want no /dev/tty):\n%s", seen.String())
	}
}

// runPattern is the -test.run pattern that selects exactly the test or
// subtest named name in a re-executed test binary.
func runPattern(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}

func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pty: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	return m, s
}
