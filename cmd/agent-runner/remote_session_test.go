package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/agent-runner/agent-runner/client"
	"github.com/agent-runner/agent-runner/job"
)

// sandboxWorker starts `agent-runner worker` with its own store and its
// own token (listed in the API node's --nats-workers file).
func sandboxWorker(t *testing.T, natsAddr, tokenFile, store string) *exec.Cmd {
	t.Helper()
	w := exec.Command(binary, "worker", "--nats", "nats://"+natsAddr, "--nats-token-file", tokenFile, "--store-dir", store,
		"--log-level", "warn", "--workspace-root", os.TempDir(), "--default-backend", "local_process", "--unsafe-local-process")
	w.Stderr = os.Stderr
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Process.Kill(); w.Wait() })
	return w
}

// workerCredential writes a worker token file and the API node's
// workers file listing it.
func workerCredential(t *testing.T) (workers, tokenFile string) {
	t.Helper()
	dir := t.TempDir()
	token := rand.Text()
	sum := sha256.Sum256([]byte(token))
	workers, tokenFile = filepath.Join(dir, "workers"), filepath.Join(dir, "token")
	if err := os.WriteFile(workers, []byte("sha256:"+hex.EncodeToString(sum[:])+" sandbox-host\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return workers, tokenFile
}

// TestRemoteSessionOnWorker: a sandbox created through the API node
// (which hosts none itself) lands on a worker with its own store and
// token; exec, a file round trip, a PTY driven over the WebSocket and a
// server's port all go through the API node. Then the worker is killed: the sandbox ends
// failed with session.worker_lost, and an exec answers that code.
func TestRemoteSessionOnWorker(t *testing.T) {
	apiStore, workerStore := t.TempDir(), t.TempDir()
	workers, tokenFile := workerCredential(t)
	addr, natsAddr := freeAddr(t), freeAddr(t)
	startServe(t, addr, "--store-dir", apiStore, "--no-workers", "--nats-listen", natsAddr, "--nats-workers", workers,
		"--no-local-sandboxes", "--sandbox-worker-timeout", "2s", "--default-backend", "local_process", "--unsafe-local-process")
	w := sandboxWorker(t, natsAddr, tokenFile, workerStore)
	c := client.New("http://"+addr, "")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var sb client.Sandbox
	waitFor(t, 20*time.Second, "a create placed on the worker once it is heard", func() bool {
		var err error
		sb, err = c.CreateSandbox(ctx, client.SandboxRequest{ID: "far", TimeoutS: 600})
		if job.CodeOf(err) == job.CodeSessionLimit {
			return false // no heartbeat yet
		}
		if err != nil {
			t.Fatalf("CreateSandbox: %v", err)
		}
		return true
	})
	if sb.State != "running" || sb.Worker == "" {
		t.Fatalf("created %+v, want running on a worker", sb)
	}
	// The sandbox's workspace is the worker's; the API node keeps only
	// its record.
	if _, err := os.Stat(filepath.Join(workerStore, "sessions", "far", "workspace")); err != nil {
		t.Errorf("workspace on the worker: %v", err)
	}
	if _, err := os.Stat(filepath.Join(apiStore, "sessions", "far", "workspace")); err == nil {
		t.Error("the API node has a workspace of the worker's sandbox")
	}

	res, err := c.SandboxExec(ctx, "far", client.ExecRequest{Argv: []string{"sh", "-c", "echo hello from $(pwd)"}})
	if err != nil || res.Status != job.StatusCompleted || !strings.HasPrefix(res.Stdout, "hello from "+workerStore) {
		t.Fatalf("exec = %+v, %v; want stdout from the worker's workspace", res, err)
	}
	if _, err := os.Stat(filepath.Join(workerStore, "runs", res.RunID, "result.json")); err != nil {
		t.Errorf("exec's run record on the worker: %v", err)
	}
	// The exec's run record reaches the API node too, as a job's.
	waitFor(t, 20*time.Second, "the exec's run record on the API node", func() bool {
		_, err := os.Stat(filepath.Join(apiStore, "runs", res.RunID, "result.json"))
		return err == nil
	})
	// The sandbox's own stream, on the API node from the bus's start:
	// its states and its exec's run (the worker sends those), until it
	// ends failed with its worker below.
	type streamed struct {
		events []string
		err    error
	}
	stream := make(chan streamed, 1)
	go func() {
		var got streamed
		got.err = c.FollowSandboxEvents(ctx, "far", "0", func(ev client.SandboxEvent) error {
			if ev.Type == client.SandboxEventRun {
				got.events = append(got.events, ev.Run+" "+ev.RunID+" "+string(ev.Status))
			} else {
				got.events = append(got.events, string(ev.State))
			}
			return nil
		})
		stream <- got
	}()
	run, err := c.Wait(ctx, res.RunID, 50*time.Millisecond)
	if err != nil || run.Status != job.StatusCompleted || !strings.HasPrefix(run.Stdout.Text, "hello from "+workerStore) {
		t.Errorf("the exec's run on the API node = %s %q, %v; want completed with its stdout", run.Status, run.Stdout.Text, err)
	}

	data := make([]byte, 3<<20)
	rand.Read(data)
	if err := c.WriteSandboxFile(ctx, "far", "dir/blob", data, 0o600); err != nil {
		t.Fatalf("WriteSandboxFile: %v", err)
	}
	var back bytes.Buffer
	if err := c.ReadSandboxFile(ctx, "far", "dir/blob", &back); err != nil || !bytes.Equal(back.Bytes(), data) {
		t.Fatalf("ReadSandboxFile = %d bytes, %v; want the %d written", back.Len(), err, len(data))
	}

	remoteTerminal(ctx, t, addr, "far")
	remotePort(ctx, t, addr, "far", data)

	// The API node's list answers from its copy of the record.
	waitFor(t, 10*time.Second, "the API node's list to show the sandbox running on the worker", func() bool {
		list, err := c.ListSandboxes(ctx, client.SandboxFilter{State: "running"})
		return err == nil && len(list) == 1 && list[0].ID == "far" && list[0].Worker == sb.Worker
	})

	w.Process.Kill()
	w.Wait()
	execCtx, cancelExec := context.WithTimeout(ctx, 15*time.Second)
	_, err = c.SandboxExec(execCtx, "far", client.ExecRequest{Argv: []string{"true"}})
	cancelExec()
	if got := job.CodeOf(err); got != job.CodeSessionWorkerLost {
		t.Errorf("exec right after the worker died = %v, want %s", err, job.CodeSessionWorkerLost)
	}
	waitFor(t, 20*time.Second, "the sandbox recorded failed once its worker is lost", func() bool {
		got, err := c.GetSandbox(ctx, "far")
		return err == nil && got.State == "failed"
	})
	got, _ := c.GetSandbox(ctx, "far")
	if got.Error == nil || got.Error.Code != job.CodeSessionWorkerLost {
		t.Errorf("failed sandbox's error = %+v, want %s", got.Error, job.CodeSessionWorkerLost)
	}
	events := <-stream
	want := []string{"starting", "running", "exec " + res.RunID + " running", "exec " + res.RunID + " completed"}
	if events.err != nil || len(events.events) < len(want)+1 || !slices.Equal(events.events[:len(want)], want) || events.events[len(events.events)-1] != "failed" {
		t.Errorf("the sandbox's stream = %q, %v; want %q first, failed last", events.events, events.err, want)
	}
	execCtx, cancelExec = context.WithTimeout(ctx, 15*time.Second)
	defer cancelExec()
	_, err = c.SandboxExec(execCtx, "far", client.ExecRequest{Argv: []string{"true"}})
	if got := job.CodeOf(err); got != job.CodeSessionWorkerLost || execCtx.Err() != nil {
		t.Errorf("exec in the lost worker's sandbox = %v, want %s before the deadline", err, job.CodeSessionWorkerLost)
	}
}

// remoteTerminal starts a shell with a PTY in sandbox id through the API
// node and drives it over the process WebSocket (Kubernetes framing):
// `echo hi` typed on channel 0 comes back on channel 1, and `exit` ends
// it with a Success status on channel 3.
func remoteTerminal(ctx context.Context, t *testing.T, addr, id string) {
	t.Helper()
	body := `{"argv": ["sh"], "pty": {"cols": 80, "rows": 24}}`
	resp, err := http.Post("http://"+addr+"/v1/sandboxes/"+id+"/processes", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var info struct {
		PID int `json:"pid"`
	}
	json.NewDecoder(resp.Body).Decode(&info)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || info.PID == 0 {
		t.Fatalf("start a shell = %d %+v", resp.StatusCode, info)
	}
	url := "ws://" + addr + "/v1/sandboxes/" + id + "/processes/" + strconv.Itoa(info.PID) + "/ws"
	// A browser's Origin (serve's own) is checked on the worker too.
	ws, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{Subprotocols: []string{"v4.channel.k8s.io"},
		HTTPHeader: http.Header{"Origin": {"http://" + addr}}})
	if err != nil {
		t.Fatalf("WebSocket through the API node: %v", err)
	}
	defer ws.CloseNow()
	send := func(s string) {
		if err := ws.Write(ctx, websocket.MessageBinary, append([]byte{0}, s...)); err != nil {
			t.Fatal(err)
		}
	}
	var out strings.Builder
	// read collects channel 1 until done says so, and returns channel 3's
	// status when the process ends first.
	read := func(done func() bool) string {
		for !done() {
			typ, b, err := ws.Read(ctx)
			if err != nil {
				t.Fatalf("terminal read: %v (output so far %q)", err, out.String())
			}
			if typ != websocket.MessageBinary || len(b) == 0 {
				continue
			}
			switch b[0] {
			case 1:
				out.Write(b[1:])
			case 3:
				return string(b[1:])
			}
		}
		return ""
	}
	send("echo hi\n")
	// The terminal echoes the typed line, then the shell prints hi.
	read(func() bool { return strings.Count(out.String(), "hi\r\n") >= 2 })
	send("exit\n")
	if status := read(func() bool { return false }); !strings.Contains(status, `"Success"`) {
		t.Errorf("status after exit = %s, want Success", status)
	}
}

// remotePort starts Python's http.server on a loopback port in sandbox
// id and reads the file dir/blob (want) it serves through the API node's
// ports route.
func remotePort(ctx context.Context, t *testing.T, addr, id string, want []byte) {
	t.Helper()
	_, port, _ := strings.Cut(freeAddr(t), ":")
	body := `{"argv": ["python3", "-m", "http.server", "` + port + `", "--bind", "127.0.0.1", "--directory", "dir"]}`
	resp, err := http.Post("http://"+addr+"/v1/sandboxes/"+id+"/processes", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("start http.server = %d", resp.StatusCode)
	}
	url := "http://" + addr + "/v1/sandboxes/" + id + "/ports/" + port + "/blob"
	var got []byte
	waitFor(t, 20*time.Second, "the sandbox's http.server to answer through the API node", func() bool {
		resp, err := http.Get(url)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		got, err = io.ReadAll(resp.Body)
		return err == nil && resp.StatusCode == http.StatusOK
	})
	if !bytes.Equal(got, want) {
		t.Errorf("the file through the port = %d bytes, want the %d written", len(got), len(want))
	}
}
