package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agent-runner/agent-runner/auth"
	"github.com/agent-runner/agent-runner/client"
	"github.com/agent-runner/agent-runner/job"
)

// TestTwoTokensNamingOneCache: through serve, the tokens alice and bob
// both name the cache "x": each finds only what it wrote itself, an
// unnamed token may not name a cache, and "shared-x", which the operator
// shares (--shared-cache), is one cache for both.
func TestTwoTokensNamingOneCache(t *testing.T) {
	sandboxUsable(t)
	addr, store := freeAddr(t), openDir(t)
	file := filepath.Join(t.TempDir(), "tokens")
	lines := auth.Hash("tok-a") + " submit,read alice\n" + auth.Hash("tok-b") + " submit,read bob\n" + auth.Hash("tok-anon") + " submit,read\n"
	if err := os.WriteFile(file, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	startServe(t, addr, "--store-dir", store, "--workers", "1", "--token-file", file, "--shared-cache", "shared-x")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Each job prints what the cache's owner file held, then writes its own.
	body := func(cache, who string) []byte {
		script := "import os\np='/cache/c/owner'\nprint(open(p).read() if os.path.exists(p) else '-')\nopen(p,'w').write('" + who + "')"
		return []byte(`{"workspace":{"path":"` + openDir(t) + `","caches":[{"name":"` + cache + `","path":"/cache/c"}]},` +
			`"command":{"argv":["/usr/bin/python3","-c",` + jsonString(script) + `]},"policy":{"allowed_commands":["python3"]},"backend":{"kind":"linux_sandbox"}}`)
	}
	run := func(token, cache, who string) string {
		t.Helper()
		c := client.New("http://"+addr, token)
		acc, err := c.Submit(ctx, body(cache, who))
		if err != nil {
			t.Fatalf("submit as %s: %v", who, err)
		}
		res, err := c.Wait(ctx, acc.JobID, 100*time.Millisecond)
		if err != nil || res.Status != job.StatusCompleted {
			t.Fatalf("job of %s = %s %+v %v\n%s", who, res.Status, res.Error, err, res.Stderr.Text)
		}
		return res.Stdout.Text
	}
	for _, tt := range []struct{ token, cache, who, want string }{
		{"tok-a", "x", "alice", "-\n"},
		{"tok-b", "x", "bob", "-\n"},
		{"tok-a", "x", "alice2", "alice\n"},
		{"tok-b", "x", "bob2", "bob\n"},
		{"tok-a", "shared-x", "alice", "-\n"},
		{"tok-b", "shared-x", "bob", "alice\n"},
	} {
		if got := run(tt.token, tt.cache, tt.who); got != tt.want {
			t.Errorf("%s's job on cache %s printed %q, want %q", tt.who, tt.cache, got, tt.want)
		}
	}
	_, err := client.New("http://"+addr, "tok-anon").Submit(ctx, body("x", "anon"))
	if got, want := job.CodeOf(err), job.CodeInvalidRequest; got != want {
		t.Errorf("unnamed token naming a cache: code %q, want %q (%v)", got, want, err)
	}
	for _, dir := range []string{"token-alice/x", "token-bob/x", "shared/shared-x"} {
		if _, err := os.Stat(filepath.Join(store, "caches", dir, "owner")); err != nil {
			t.Errorf("cache %s: %v", dir, err)
		}
	}
}
