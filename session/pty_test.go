package session_test

import (
	"context"
	"testing"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/session"
)

// TestProcessPty: a shell on a pty in a sandbox whose policy allows
// the shell: stty size says the start's size, then a resize's; ^C
// typed reaches the foreground process (a sleep of an hour) and the
// shell reads the next line; ^D after exit ends it with exit code 0.
func TestProcessPty(t *testing.T) {
	for _, kind := range backends() {
		t.Run(kind, func(t *testing.T) {
			f := newFixture(t, kind, nil)
			pol := &job.Policy{AllowedCommands: []job.CommandRule{{Basename: "sh"}}, AllowShell: true}
			id := f.create(t, session.CreateRequest{Policy: pol}).ID
			ctx := context.Background()
			info, err := f.s.StartProcess(ctx, id, session.ProcessRequest{Argv: []string{"sh"}, Pty: &session.PtySize{Cols: 80, Rows: 24}})
			if err != nil {
				t.Fatal(err)
			}
			typeIn := func(s string) {
				t.Helper()
				if err := f.s.WriteStdin(ctx, id, info.PID, []byte(s), false); err != nil {
					t.Fatal(err)
				}
			}
			typeIn("stty size\n")
			_, at := follow(t, f, id, info.PID, 0, "24 80")
			if err := f.s.ResizeProcess(id, info.PID, session.PtySize{Cols: 100, Rows: 30}); err != nil {
				t.Fatal(err)
			}
			typeIn("stty size\n")
			_, at = follow(t, f, id, info.PID, at, "30 100")
			typeIn("sh -c 'echo arm''ed; exec sleep 3600'\n")
			_, at = follow(t, f, id, info.PID, at, "armed")
			typeIn("\x03echo back-$((40+2))\n")
			_, at = follow(t, f, id, info.PID, at, "back-42")
			typeIn("exit 0\n")
			evs, _ := follow(t, f, id, info.PID, at)
			end, _ := evs[len(evs)-1].Data.(session.ProcessInfo)
			if end.ExitCode == nil || *end.ExitCode != 0 {
				t.Errorf("the shell ended %+v; want exit code 0", end)
			}
		})
	}
}
