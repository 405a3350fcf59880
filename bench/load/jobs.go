package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/agent-runner/agent-runner/client"
)

// workspace makes the jobs' tiny workspace under dir.
func workspace(dir string) (string, error) {
	ws := filepath.Join(dir, "ws")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		return "", err
	}
	return ws, os.WriteFile(filepath.Join(ws, "README"), []byte("tiny\n"), 0o644)
}

// jobBody is a request to run /bin/true in ws on backend kind; with
// allowShell its policy allows the shell, so linux_sandbox builds no shell
// denial (Landlock rules around the view's shells, the exec recorder) and
// the difference prices it.
func jobBody(ws, kind string, allowShell bool) []byte {
	body, _ := json.Marshal(map[string]any{
		"workspace": map[string]any{"path": ws},
		"command":   map[string]any{"argv": []string{"/bin/true"}},
		"policy":    map[string]any{"allowed_commands": []string{"true"}, "allow_shell": allowShell},
		"backend":   map[string]any{"kind": kind},
	})
	return body
}

// runJob submits body and long-polls the job to its result, for at most
// b.Timeout (a stuck server, or a worker that never joined, ends the run
// instead of hanging it); it fails unless the job completed on kind (a server that silently ran another
// backend would otherwise be measured under the wrong name).
func (b *bench) runJob(c *client.Client, body []byte, kind string) error {
	ctx, cancel := context.WithTimeout(context.Background(), b.Timeout)
	defer cancel()
	acc, err := c.Submit(ctx, body)
	if err != nil {
		return err
	}
	res, err := c.Wait(ctx, acc.JobID, 2*time.Millisecond)
	if err != nil {
		return err
	}
	if res.Status != "completed" || res.Backend != kind {
		return fmt.Errorf("job %s: %s on %s, want completed on %s (error %v)", acc.JobID, res.Status, res.Backend, kind, res.Error)
	}
	return nil
}

// jobServeArgs are serve's flags for the job modes on kind.
func (b *bench) jobServeArgs(kind string) []string {
	args := append([]string{"--workers", strconv.Itoa(b.Workers), "--queue-capacity", "100000"}, backendArgs(kind)...)
	return append(args, b.ServerArgs...)
}

// jobMode measures /bin/true jobs on kind at each level, then (on
// local_process) serve's RSS with jobs queued.
func (b *bench) jobMode(kind string) error {
	args := b.jobServeArgs(kind)
	s, err := b.startServe(b.store(kind), args...)
	if err != nil {
		return err
	}
	defer s.stop()
	body := jobBody(b.ws, kind, b.AllowShell)
	fmt.Fprintf(b.Out, "== %s: /bin/true jobs, serve %v, %d jobs per level\n", kind, args, b.Jobs)
	if err := b.runJob(s.client, body, kind); err != nil { // warm-up, not counted
		return err
	}
	printHeader(b.Out, "jobs")
	for _, conc := range b.Levels {
		smp, err := measure(conc, b.Jobs, func(int) error { return b.runJob(s.client, body, kind) })
		if err != nil {
			return err
		}
		printRow(b.Out, smp.summary())
	}
	m, err := s.memory()
	if err != nil {
		return err
	}
	fmt.Fprintf(b.Out, "serve RSS after the levels: %s\n", m)
	if kind != "local_process" || b.Queued == 0 {
		return nil
	}
	return b.queuedRSS(body)
}

// queuedRSS starts serve without workers, queues b.Queued jobs and prints
// its RSS before and after.
func (b *bench) queuedRSS(body []byte) error {
	s, err := b.startServe(b.store("queue"), append(backendArgs("local_process"), "--no-workers", "--queue-capacity", strconv.Itoa(b.Queued+10))...)
	if err != nil {
		return err
	}
	defer s.stop()
	idle, err := s.memory()
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	next := make(chan struct{})
	go func() {
		for i := 0; i < b.Queued; i++ {
			next <- struct{}{}
		}
		close(next)
	}()
	for w := 0; w < 32; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range next {
				if _, err := s.client.Submit(context.Background(), body); err != nil {
					errs <- err
					for range next {
					}
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	full, err := s.memory()
	if err != nil {
		return err
	}
	fmt.Fprintf(b.Out, "serve RSS idle: %d MB; with %d jobs queued: %d MB (goal < 100 MB)\n", idle.RSS>>20, b.Queued, full.RSS>>20)
	return nil
}
