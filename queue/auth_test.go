package queue_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/queue"
)

func worker(name, token string) queue.Worker {
	return queue.Worker{Name: name, Hash: sha256.Sum256([]byte(token))}
}

// TestListenerNeedsACredential: the embedded server exposes no listener
// that takes clients without a token.
func TestListenerNeedsACredential(t *testing.T) {
	_, err := queue.Open(context.Background(), queue.Config{StoreDir: t.TempDir(), Listen: "127.0.0.1:-1"})
	if job.CodeOf(err) != job.CodeInvalidRequest {
		t.Fatalf("Open with a listener and no credential = %v, want %s", err, job.CodeInvalidRequest)
	}
}

// TestClientsWithoutTheCredentialAreRefused: a loopback listener refuses
// a client without a token, with a wrong one, and with a worker's token
// that the server does not list.
func TestClientsWithoutTheCredentialAreRefused(t *testing.T) {
	api := open(t, queue.Config{Listen: "127.0.0.1:-1", Token: "shared", Workers: []queue.Worker{worker("a", "token-a")}})
	url := api.Conn().ConnectedUrl()
	for _, tok := range []string{"", "wrong", "token-b"} {
		opts := []nats.Option{nats.Timeout(2 * time.Second)}
		if tok != "" {
			opts = append(opts, nats.Token(tok))
		}
		if nc, err := nats.Connect(url, opts...); err == nil {
			nc.Close()
			t.Errorf("a client with token %q connected", tok)
		}
	}
	for _, tok := range []string{"shared", "token-a"} {
		nc, err := nats.Connect(url, nats.Token(tok))
		if err != nil {
			t.Errorf("a client with token %q: %v", tok, err)
			continue
		}
		nc.Close()
	}
}

// violations connects with token and collects the permission errors the
// server reports.
type violations struct {
	mu   sync.Mutex
	errs []string
}

func (v *violations) handler(_ *nats.Conn, _ *nats.Subscription, err error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.errs = append(v.errs, err.Error())
}

func (v *violations) list() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]string(nil), v.errs...)
}

// TestWorkerPermissions: a worker's token takes and acknowledges jobs
// (the API node claims each delivery in its name), but publishes records
// only under its own id, cannot write claims or queue jobs, and cannot
// subscribe to what others hear.
func TestWorkerPermissions(t *testing.T) {
	ctx := context.Background()
	a, b := worker("a", "token-a"), worker("b", "token-b")
	api := open(t, queue.Config{Capacity: 4, Listen: "127.0.0.1:-1", Workers: []queue.Worker{a, b}})
	url := api.Conn().ConnectedUrl()
	w := open(t, queue.Config{URL: url, Join: true, Token: "token-a"})
	if w.WorkerID() != a.ID() {
		t.Fatalf("WorkerID = %s, want %s", w.WorkerID(), a.ID())
	}
	if err := api.Enqueue(ctx, "job_w", []byte("w")); err != nil {
		t.Fatal(err)
	}
	d := next(t, w)
	if d.JobID != "job_w" {
		t.Fatalf("worker got %s, want job_w", d.JobID)
	}
	if err := d.Done(ctx); err != nil {
		t.Fatalf("worker's ack: %v", err)
	}
	// The API node saw the delivery go to a's inbox and claimed it in
	// a's name.
	js, _ := jetstream.New(api.Conn())
	claims, err := js.Stream(ctx, queue.ClaimsStream)
	if err != nil {
		t.Fatal(err)
	}
	var c *jetstream.RawStreamMsg
	for deadline := time.Now().Add(5 * time.Second); c == nil; time.Sleep(20 * time.Millisecond) {
		c, _ = claims.GetLastMsgForSubject(ctx, queue.ClaimsPrefix+"*.job.job_w")
		if time.Now().After(deadline) {
			t.Fatal("no claim of job_w")
		}
	}
	if want := queue.ClaimsPrefix + a.ID() + ".job.job_w"; c.Subject != want {
		t.Errorf("claim on %s, want %s", c.Subject, want)
	}
	// What reaches an API subscriber of everything.
	got := make(chan string, 16)
	sub, err := api.Conn().Subscribe(">", func(m *nats.Msg) {
		if !strings.HasPrefix(m.Subject, "$") && !strings.HasPrefix(m.Subject, "_INBOX") && !strings.HasPrefix(m.Subject, queue.ClaimsPrefix) {
			got <- m.Subject
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	api.Conn().Flush()
	v := &violations{}
	nc, err := nats.Connect(url, nats.Token("token-a"), nats.ErrorHandler(v.handler), nats.CustomInboxPrefix(queue.InboxPrefix(a.ID())))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	subjects := []string{
		queue.RecordsPrefix + a.ID() + ".job.job_w",
		queue.ClaimsPrefix + a.ID() + ".job.job_w",
		queue.RecordsPrefix + b.ID() + ".job.job_w",
		queue.ClaimsPrefix + b.ID() + ".job.job_w",
		"ar.jobs.job_forged",
	}
	for _, s := range subjects {
		if err := nc.Publish(s, []byte("{}")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := nc.Subscribe("ar.events.>", func(*nats.Msg) {}); err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Subscribe(queue.InboxPrefix(b.ID())+".>", func(*nats.Msg) {}); err != nil {
		t.Fatal(err)
	}
	nc.Flush()
	var heard []string
	for deadline := time.After(2 * time.Second); len(heard) < 1; {
		select {
		case s := <-got:
			heard = append(heard, s)
		case <-deadline:
			t.Fatalf("heard %q, want the worker's own record", heard)
		}
	}
	time.Sleep(200 * time.Millisecond)
	close(got)
	for s := range got {
		heard = append(heard, s)
	}
	if diff := cmp.Diff(subjects[:1], heard); diff != "" {
		t.Errorf("published by worker a (-want +got):\n%s", diff)
	}
	if n := len(v.list()); n != 6 {
		t.Errorf("permission violations = %q, want 6 (4 publishes, 2 subscriptions)", v.list())
	}
}

// TestTokenFile: the generated token file is 0600 in a 0700 directory,
// kept across calls, and one others can read is refused.
func TestTokenFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nats")
	path, token, err := queue.EnsureTokenFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]os.FileMode{dir: 0o700, path: 0o600} {
		fi, err := os.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("mode of %s = %o, want %o", name, got, want)
		}
	}
	_, again, err := queue.EnsureTokenFile(dir)
	if err != nil || again != token || len(token) < 40 {
		t.Errorf("second EnsureTokenFile = %q, %v; want the first token %q", again, err, token)
	}
	if got, err := queue.ReadTokenFile(path); err != nil || got != token {
		t.Errorf("ReadTokenFile = %q, %v; want %q", got, err, token)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := queue.ReadTokenFile(path); job.CodeOf(err) != job.CodeInvalidRequest {
		t.Errorf("ReadTokenFile of a 0644 file = %v, want %s", err, job.CodeInvalidRequest)
	}
	if _, err := queue.ReadTokenFile(filepath.Join(dir, "none")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ReadTokenFile of no file = %v, want not exist", err)
	}
}

func TestLoadWorkers(t *testing.T) {
	a := worker("host-a", "token-a")
	tests := []struct {
		name, text string
		want       []queue.Worker
		wantErr    bool
	}{
		{name: "ok", text: "# workers\n\nsha256:" + hexOf(a.Hash) + " host-a\n", want: []queue.Worker{a}},
		{name: "plaintext", text: "token-a host-a\n", wantErr: true},
		{name: "no name", text: "sha256:" + hexOf(a.Hash) + "\n", wantErr: true},
		{name: "twice", text: "sha256:" + hexOf(a.Hash) + " a\nsha256:" + hexOf(a.Hash) + " b\n", wantErr: true},
		{name: "empty", text: "# nobody\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "workers")
			os.WriteFile(path, []byte(tt.text), 0o600)
			got, err := queue.LoadWorkers(path)
			if (err != nil) != tt.wantErr {
				t.Fatalf("LoadWorkers = %v, want error %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("LoadWorkers (-want +got):\n%s", diff)
			}
		})
	}
	if id := queue.WorkerID("token-a"); id != a.ID() || len(id) != 16 {
		t.Errorf("WorkerID = %q, want %q (16 hex digits)", id, a.ID())
	}
}

func hexOf(h [32]byte) string { return hex.EncodeToString(h[:]) }

// TestWorkerSandboxPermissions: a worker hears only its own
// ar.sandboxes.to.<id>.> and publishes only on its own
// ar.sandboxes.from.<id>.>, so it can neither reach another worker's
// sandboxes nor answer in its name.
func TestWorkerSandboxPermissions(t *testing.T) {
	a, b := worker("a", "token-a"), worker("b", "token-b")
	api := open(t, queue.Config{Listen: "127.0.0.1:-1", Workers: []queue.Worker{a, b}})
	url := api.Conn().ConnectedUrl()
	heard := make(chan string, 16)
	sub, err := api.Conn().Subscribe("ar.sandboxes.>", func(m *nats.Msg) { heard <- m.Subject })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	api.Conn().Flush()
	v := &violations{}
	nc, err := nats.Connect(url, nats.Token("token-a"), nats.ErrorHandler(v.handler))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	for _, s := range []string{"ar.sandboxes.>", queue.SandboxesToPrefix + b.ID() + ".>"} {
		if _, err := nc.Subscribe(s, func(*nats.Msg) {}); err != nil {
			t.Fatal(err)
		}
	}
	own := make(chan string, 1)
	if _, err := nc.Subscribe(queue.SandboxesToPrefix+a.ID()+".i1.dial", func(m *nats.Msg) { own <- m.Subject }); err != nil {
		t.Fatal(err)
	}
	nc.Flush()
	// Forged first, then the worker's own: once the own one arrives, a
	// forged one that got through would have arrived before it.
	sentinel := queue.SandboxesFromPrefix + a.ID() + ".i1.beat"
	for _, s := range []string{queue.SandboxesFromPrefix + b.ID() + ".i1.beat", queue.SandboxesToPrefix + b.ID() + ".i1.dial", sentinel} {
		if err := nc.Publish(s, []byte("{}")); err != nil {
			t.Fatal(err)
		}
	}
	if got := <-heard; got != sentinel {
		t.Errorf("the API node heard %s first, want only the worker's own %s", got, sentinel)
	}
	api.Conn().Publish(queue.SandboxesToPrefix+a.ID()+".i1.dial", nil)
	if got := <-own; got != queue.SandboxesToPrefix+a.ID()+".i1.dial" {
		t.Errorf("worker a heard %s", got)
	}
	for deadline := time.Now().Add(5 * time.Second); len(v.list()) < 4; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			break
		}
	}
	if n := len(v.list()); n != 4 {
		t.Errorf("permission violations = %q, want 4 (2 subscriptions, 2 publishes)", v.list())
	}
}
