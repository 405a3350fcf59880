package session_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/session"
	"github.com/agent-runner/agent-runner/workspaceroot"
)

// poolFixture is a service whose template "t" keeps a pool of size
// sandboxes (filled before it returns), with a workspace root holding
// proj/README; edit changes the config further.
func poolFixture(t testing.TB, kind string, size int, edit func(*session.Config)) (*fixture, string) {
	t.Helper()
	root := t.TempDir()
	proj := filepath.Join(root, "proj")
	if err := os.MkdirAll(filepath.Join(proj, "src"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(proj, "README"), []byte("from the caller\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	roots, err := workspaceroot.New([]string{root})
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, kind, func(c *session.Config) {
		c.Roots = roots
		c.Templates = map[string]session.Template{
			"t":    {Pool: size, Env: map[string]string{"FROM": "template", "KEEP": "template"}, TimeoutS: 300},
			"cold": {},
		}
		if edit != nil {
			edit(c)
		}
	})
	waitPools(t, f)
	return f, proj
}

// waitPools waits until f's pools are full (a pool that never fills
// fails the test after a minute).
func waitPools(t testing.TB, f *fixture) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := f.s.WaitPools(ctx); err != nil {
		t.Fatalf("WaitPools = %v", err)
	}
}

// TestPoolClaim: a create naming a template with a pool claims a warm
// sandbox that takes the template's defaults and the request's own
// fields (its workspace, env, metadata), and says so in its record; the
// pool refills; pooled sandboxes are never listed.
func TestPoolClaim(t *testing.T) {
	for _, kind := range backends() {
		t.Run(kind, func(t *testing.T) {
			f, proj := poolFixture(t, kind, 1, nil)
			if list, err := f.s.List(session.Filter{}); err != nil || len(list) != 0 {
				t.Fatalf("List with a full pool = %v, %v; want none", list, err)
			}
			rec := f.create(t, session.CreateRequest{Template: "t", Workspace: &session.Workspace{Path: proj},
				Env: map[string]string{"KEEP": "request"}, Metadata: map[string]string{"who": "a"}})
			if rec.Start != session.StartWarm || rec.StartReason != "" || rec.Template != "t" || rec.TimeoutS != 300 {
				t.Errorf("record start %q %q template %q timeout %d; want warm, t, 300", rec.Start, rec.StartReason, rec.Template, rec.TimeoutS)
			}
			res, err := f.s.Exec(context.Background(), rec.ID, session.ExecRequest{
				Argv: []string{"sh", "-c", `cat README; echo "$FROM $KEEP $OWN"`}, Env: map[string]string{"OWN": "exec"}})
			if err != nil || res.Status != job.StatusCompleted {
				t.Fatalf("Exec = %+v, %v", res, err)
			}
			if want := "from the caller\ntemplate request exec\n"; res.Stdout != want {
				t.Errorf("stdout = %q, want %q", res.Stdout, want)
			}
			stored, err := f.r.Store().ReadResult(res.RunID)
			if err != nil || stored.Sandbox != rec.ID {
				t.Errorf("run %s records sandbox %q, %v; want %s", res.RunID, stored.Sandbox, err, rec.ID)
			}
			// The pool refills, and the next create is warm too.
			waitPools(t, f)
			if next := f.create(t, session.CreateRequest{Template: "t"}); next.Start != session.StartWarm {
				t.Errorf("create after the refill: start %q %q, want warm", next.Start, next.StartReason)
			}
			list, err := f.s.List(session.Filter{})
			if err != nil || len(list) != 2 {
				t.Errorf("List = %d sandboxes, %v; want the 2 created", len(list), err)
			}
		})
	}
}

// TestPoolCold: a create the pool cannot serve cold-starts and says why:
// no template, a template without a pool, an empty pool, a request of
// another shape.
func TestPoolCold(t *testing.T) {
	for _, kind := range backends() {
		t.Run(kind, func(t *testing.T) {
			f, _ := poolFixture(t, kind, 1, func(c *session.Config) {
				c.PoolRefillDelay = time.Hour
				c.AllowHostNetwork = true
			})
			tests := []struct {
				name string
				req  session.CreateRequest
				want string
			}{
				{"no template", session.CreateRequest{}, session.ColdNoTemplate},
				{"no pool", session.CreateRequest{Template: "cold"}, session.ColdNoPool},
				{"limits", session.CreateRequest{Template: "t", Limits: session.Limits{MemoryMB: 300}}, session.ColdShapeLimits},
				{"network", session.CreateRequest{Template: "t", Network: &session.Network{Mode: job.NetworkHost}}, session.ColdShapeNetwork},
				{"warm", session.CreateRequest{Template: "t"}, ""},
				{"drained", session.CreateRequest{Template: "t"}, session.ColdPoolEmpty},
			}
			for _, tt := range tests {
				rec := f.create(t, tt.req)
				wantStart := session.StartCold
				if tt.want == "" {
					wantStart = session.StartWarm
				}
				if rec.Start != wantStart || rec.StartReason != tt.want {
					t.Errorf("%s: start %q reason %q, want %q %q", tt.name, rec.Start, rec.StartReason, wantStart, tt.want)
				}
			}
			_, _, err := f.s.Create(context.Background(), session.CreateRequest{Template: "nope"})
			wantCode(t, "unknown template", err, job.CodeInvalidRequest)
			if e := job.AsError(err); e == nil || e.Details["field"] != "template" {
				t.Errorf("unknown template: details %v, want field template", e)
			}
		})
	}
}

// TestPoolShellDenied: a template whose policy denies the shell pools
// sandboxes that deny it; a request that allows it is of another shape.
func TestPoolShellDenied(t *testing.T) {
	f, _ := poolFixture(t, "linux_sandbox", 1, func(c *session.Config) {
		c.Templates["t"] = session.Template{Pool: 1, Policy: &job.Policy{AllowShell: false}}
	})
	cold := f.create(t, session.CreateRequest{Template: "t", Policy: &job.Policy{AllowShell: true}})
	if cold.Start != session.StartCold || cold.StartReason != session.ColdShapePolicy {
		t.Errorf("allow_shell over a denying template: %q %q, want cold %q", cold.Start, cold.StartReason, session.ColdShapePolicy)
	}
	warm := f.create(t, session.CreateRequest{Template: "t"})
	if warm.Start != session.StartWarm {
		t.Fatalf("start %q %q, want warm", warm.Start, warm.StartReason)
	}
	if res := f.exec(t, warm.ID, "sh", "-c", "true"); res.Status == job.StatusCompleted {
		t.Errorf("a shell in a warm sandbox of a shell-denying template: %s, want refused", res.Status)
	}
}

// TestPoolClaimsApart: pooled sandboxes are used once. What one claim
// wrote (in its workspace and its /tmp) and the processes it left are
// not seen by the next claim, whose workspace holds exactly its own
// copy, owned by the user its processes run as; and nothing of the pool
// (its directory) is visible inside.
func TestPoolClaimsApart(t *testing.T) {
	f, proj := poolFixture(t, "linux_sandbox", 2, nil)
	a := f.create(t, session.CreateRequest{Template: "t", Workspace: &session.Workspace{Path: proj}})
	if res := f.exec(t, a.ID, "sh", "-c", "echo secret >left.txt; echo secret >/tmp/left.txt; (sleep 600 &) ; true"); res.Status != job.StatusCompleted {
		t.Fatalf("exec in a: %s %+v", res.Status, res.Error)
	}
	b := f.create(t, session.CreateRequest{Template: "t", Workspace: &session.Workspace{Path: proj}})
	if a.Start != session.StartWarm || b.Start != session.StartWarm {
		t.Fatalf("starts %q %q, want both warm", a.Start, b.Start)
	}
	res := f.exec(t, b.ID, "sh", "-c", `ls -A; ls -A /tmp; ps -e -o comm= | grep -c sleep; stat -c %u README src; id -u`)
	lines := strings.Split(strings.TrimSpace(res.Stdout), "\n")
	uid := lines[len(lines)-1]
	want := []string{"README", "src", "0", uid, uid, uid}
	if strings.Join(lines, ",") != strings.Join(want, ",") {
		t.Errorf("b sees %q, want %q (its own copy, an empty /tmp, no sleep of a, owned by its uid)", lines, want)
	}
	if strings.Contains(res.Stdout, "left") {
		t.Errorf("b sees what a wrote: %q", res.Stdout)
	}
	// The pool's directory is not in the view.
	if res := f.exec(t, b.ID, "sh", "-c", "mount | grep -c session-pool"); strings.TrimSpace(res.Stdout) != "0" {
		t.Errorf("mounts naming the pool inside: %q, want 0", res.Stdout)
	}
}

// TestPoolClaimRepository: a warm claim's workspace.repository is
// cloned at the claim (the commit asked) and moved into the pooled
// sandbox's workspace, owned by the user its processes run as.
func TestPoolClaimRepository(t *testing.T) {
	for _, kind := range backends() {
		t.Run(kind, func(t *testing.T) {
			f, proj := poolFixture(t, kind, 1, nil)
			repo, first := gitRepo(t, filepath.Dir(proj))
			rec := f.create(t, session.CreateRequest{Template: "t", Workspace: &session.Workspace{Repository: repo, Commit: first}})
			if rec.Start != session.StartWarm {
				t.Fatalf("start %q %q, want warm", rec.Start, rec.StartReason)
			}
			res := f.exec(t, rec.ID, "sh", "-c", `cat note.txt; test "$(stat -c %u note.txt)" = "$(id -u)" && echo owned`)
			if res.Stdout != "one\nowned\n" {
				t.Errorf("the claimed clone = %q %q, want the first commit's note, owned by the sandbox's user", res.Stdout, res.Stderr)
			}
		})
	}
}
