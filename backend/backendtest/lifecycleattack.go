package backendtest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agent-runner/agent-runner/backend"
)

// Attacks on a kept sandbox (backend.Sandboxes), part of the adversarial
// suite: what a workload leaves behind must die with the sandbox, and
// the channel the runner drives the sandbox through must be out of its
// reach.

func advDaemonDiesAtDelete(t *testing.T, newBackend Factory) {
	sb, spec := create(t, newBackend(t))
	// A daemon in a session of its own, whose parent exits at once.
	daemon := `i=0; while :; do i=$((i+1)); echo $i > count.tmp; mv count.tmp count; sleep 0.02; done`
	o, _, _ := lifeExec(t, sb, sh(`setsid /bin/sh -c '`+daemon+`' </dev/null >/dev/null 2>&1 & exit 0`))
	wantExit(t, o, 0)
	waitFor(t, "the daemon's counter to reach 3", func() bool { return readCount(t, sb) >= 3 })
	if err := sb.Delete(context.Background()); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	host := hostCount(spec)
	time.Sleep(300 * time.Millisecond)
	if got := hostCount(spec); got != host {
		t.Errorf("the daemon's counter went from %d to %d after Delete: it outlived its sandbox", host, got)
	}
}

// controlProbe looks for any socket among the workload's descriptors,
// writes a forged exec request to every descriptor above stderr, and
// tries the init's descriptors through /proc.
const controlProbe = `
import json, os, stat
req = json.dumps({"op": "exec", "id": 99, "argv": ["/bin/touch", "/workspace/forged"], "cwd": "."}).encode()
for fd in range(3, 256):
    try:
        st = os.fstat(fd)
    except OSError:
        continue
    if stat.S_ISSOCK(st.st_mode):
        print("SOCKET", fd)
    try:
        os.write(fd, req)
        print("WROTE", fd)
    except OSError:
        pass
for p in ["/proc/1/fd/4", "/proc/1/fd/3"]:
    try:
        fd = os.open(p, os.O_RDWR)
        os.write(fd, req)
        print("OPENED", p)
    except OSError as e:
        print("DENIED", p, type(e).__name__)
print("DONE")
`

func advControlChannelUnreachable(t *testing.T, newBackend Factory) {
	sb, _ := create(t, newBackend(t))
	o, out, errb := lifeExec(t, sb, backend.Exec{Argv: []string{"/usr/bin/python3", "-c", controlProbe}})
	wantExit(t, o, 0)
	if !strings.Contains(out, "DONE") {
		t.Fatalf("the probe did not finish: stdout %q stderr %q", out, errb)
	}
	for _, bad := range []string{"SOCKET", "WROTE", "OPENED"} {
		if strings.Contains(out, bad) {
			t.Errorf("the workload reached a descriptor of the runner's (%s):\n%s", bad, out)
		}
	}
	// Had a forged request got through, the init would have made this.
	o, out, _ = lifeExec(t, sb, sh(`test -e forged && echo FORGED || echo clean`))
	wantExit(t, o, 0)
	if out != "clean\n" {
		t.Errorf("a forged exec request ran: %q", out)
	}
}
