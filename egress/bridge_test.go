package egress

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestBridgeAdmitsOnlyItsSandbox: the socket was 0666 in a directory any
// local user could find under /tmp, so anyone could spend a run's
// allowlist (and its bound secrets) through the gateway.
func TestBridgeAdmitsOnlyItsSandbox(t *testing.T) {
	g, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := g.Open(context.Background(), &Run{ID: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for p, want := range map[string]os.FileMode{filepath.Dir(b.Socket): 0o700, b.Socket: 0o600} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s mode = %v, want %v", p, got, want)
		}
	}
	if os.Geteuid() != 0 {
		t.Skip("connecting as other uids needs root; the modes above are checked")
	}
	const sandboxUID, otherUID = 70000, 65534
	if err := GiveSocket(b.Socket, sandboxUID, sandboxUID); err != nil {
		t.Fatal(err)
	}
	// The socket is sent into the sandbox as a mount; here the connect
	// goes through /proc/self/fd of an O_PATH descriptor the same way.
	fd, err := syscall.Open(b.Socket, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	// One owner of the descriptor: the File (a second close, by its
	// finalizer after a syscall.Close, closed another test's socket).
	sock := os.NewFile(uintptr(fd), "sock")
	defer sock.Close()
	connect := func(uid int) error {
		cmd := exec.Command("/usr/bin/python3", "-c", "import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])", "/proc/self/fd/3")
		cmd.ExtraFiles = []*os.File{sock}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
		return cmd.Run()
	}
	if _, err := exec.LookPath("/usr/bin/python3"); err != nil {
		t.Skip("python3 not installed")
	}
	if err := connect(otherUID); err == nil {
		t.Errorf("uid %d connected to a bridge given to uid %d", otherUID, sandboxUID)
	}
	if err := connect(sandboxUID); err != nil {
		t.Errorf("the sandbox's uid %d cannot connect: %v", sandboxUID, err)
	}
}
