package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agent-runner/agent-runner/client"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/task/tasktest"
)

// taskManifest is a task whose agent runs agent.sh of the origin.
func taskManifest(id, origin string) []byte {
	return []byte(`version: "1"
kind: Task
metadata: {id: ` + id + `, name: remote}
repository: {url: "file://` + origin + `", branch: main}
claude: {prompt: "edit"}
agent: {command: ["/bin/sh", "agent.sh"]}
`)
}

// TestRemoteWorkerRunsATask: a task that runs on a worker with its own
// store is followed live on the API node (running, not pending) and then
// served from it: completed, its logs, its artifacts and the patch.
func TestRemoteWorkerRunsATask(t *testing.T) {
	gate := filepath.Join(t.TempDir(), "go")
	origin := tasktest.Origin(t, map[string]string{"a.txt": "one\n",
		"agent.sh": "echo from-agent\necho two > a.txt\nwhile [ ! -e " + gate + " ]; do sleep 0.05; done\necho done\n"})
	apiStore, workerStore := t.TempDir(), t.TempDir()
	c, natsURL := apiNode(t, apiStore)
	remoteWorker(t, natsURL, workerStore)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	acc, err := c.SubmitTask(ctx, taskManifest("remote-task", origin))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the task running on the worker, as the API node shows it", func() bool {
		st, err := c.GetTask(ctx, acc.TaskID)
		return err == nil && st.State == "running" && st.StartedAt != nil
	})
	// The agent's output and heartbeats stream live to the API node's
	// task stream while the task still runs there.
	errSeen := errors.New("seen")
	var output, progress bool
	fctx, fcancel := context.WithTimeout(ctx, 30*time.Second)
	err = c.FollowTask(fctx, acc.TaskID, func(m client.TaskMessage) error {
		output = output || (m.Type == "output" && m.Text == "from-agent")
		progress = progress || m.Type == "progress"
		if output && progress {
			return errSeen
		}
		return nil
	})
	fcancel()
	if !errors.Is(err, errSeen) {
		t.Fatalf("the API node's stream of the running task = %v (output seen %v, heartbeat seen %v); want the agent's live output and heartbeats", err, output, progress)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := c.WaitTask(ctx, acc.TaskID, 50*time.Millisecond)
	if err != nil || st.State != "completed" {
		t.Fatalf("task on the API node = %+v, %v; want completed", st, err)
	}
	if st.Metadata == nil || st.Metadata.ExitCode == nil || *st.Metadata.ExitCode != 0 {
		t.Errorf("metadata = %+v, want the worker's metadata.json (exit 0)", st.Metadata)
	}
	var stdout []string
	if _, err := c.TaskLogs(ctx, acc.TaskID, func(stream, line string) error {
		if stream == "stdout" {
			stdout = append(stdout, line)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(stdout, ","); got != "from-agent,done" {
		t.Errorf("stdout lines = %q, want from-agent,done", got)
	}
	arts, err := c.TaskArtifacts(ctx, acc.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	var patch client.TaskArtifact
	for _, a := range arts {
		if a.Name == acc.TaskID+".patch" {
			patch = a
		}
	}
	if patch.Name == "" {
		t.Fatalf("artifacts = %+v, want %s.patch", arts, acc.TaskID)
	}
	var body bytes.Buffer
	header, err := c.DownloadTaskArtifact(ctx, acc.TaskID, patch.Name, &body)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(body.Bytes())
	if got := hex.EncodeToString(sum[:]); got != patch.SHA256 || header != patch.SHA256 || !strings.Contains(body.String(), "+two") {
		t.Errorf("patch download: sha256 %s, header %s, want %s; body %q", got, header, patch.SHA256, body.String())
	}
	// The record lies in both stores; the workspace only on the worker.
	for _, store := range []string{workerStore, apiStore} {
		if _, err := os.Stat(filepath.Join(store, "tasks", acc.TaskID, "outbox", "artifacts", "metadata.json")); err != nil {
			t.Errorf("record in %s: %v", store, err)
		}
	}
	if _, err := os.Stat(filepath.Join(apiStore, "tasks", acc.TaskID, "base.git")); err == nil {
		t.Error("the worker's workspace reached the API node")
	}
}

// TestRemoteWorkerKilledMidTask: a worker killed with SIGKILL while its
// task runs leaves the message unacknowledged; a second worker with
// another store takes the redelivery and ends the task failed,
// run.interrupted (a task does not run twice), and the API node shows
// that, never a task stuck running.
func TestRemoteWorkerKilledMidTask(t *testing.T) {
	origin := tasktest.Origin(t, map[string]string{"agent.sh": "echo started\nsleep 300\n"})
	c, natsURL := apiNode(t, t.TempDir())
	first := remoteWorker(t, natsURL, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	acc, err := c.SubmitTask(ctx, taskManifest("killed-remote-task", origin))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the task running on the first worker, as the API node shows it", func() bool {
		st, err := c.GetTask(ctx, acc.TaskID)
		return err == nil && st.State == "running"
	})
	first.Process.Kill()
	first.Wait()
	remoteWorker(t, natsURL, t.TempDir())
	st, err := c.WaitTask(ctx, acc.TaskID, 50*time.Millisecond)
	if err != nil || st.State != "failed" || st.Error == nil || st.Error.Code != job.CodeRunInterrupted {
		t.Errorf("task after its worker was killed = %s %+v, %v; want failed with %s", st.State, st.Error, err, job.CodeRunInterrupted)
	}
}

// TestRemoteWorkerCancelsATask: cancelling on the API node a task that
// runs on a worker with its own store stops it there; the API node ends
// with the worker's cancelled record.
func TestRemoteWorkerCancelsATask(t *testing.T) {
	origin := tasktest.Origin(t, map[string]string{"agent.sh": "echo started\nsleep 300\n"})
	c, natsURL := apiNode(t, t.TempDir())
	remoteWorker(t, natsURL, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	acc, err := c.SubmitTask(ctx, taskManifest("cancelled-remote-task", origin))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the task running on the worker, as the API node shows it", func() bool {
		st, err := c.GetTask(ctx, acc.TaskID)
		return err == nil && st.State == "running"
	})
	if _, err := c.CancelTask(ctx, acc.TaskID); err != nil {
		t.Fatal(err)
	}
	st, err := c.WaitTask(ctx, acc.TaskID, 50*time.Millisecond)
	if err != nil || st.State != "cancelled" || st.Metadata == nil {
		t.Errorf("cancelled remote task = %+v, %v; want cancelled with the worker's metadata", st, err)
	}
}
