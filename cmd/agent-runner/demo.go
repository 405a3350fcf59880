package main

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/runner"
)

// demoFiles is a small Python project with a unittest suite and a .env
// file that the snapshot's protected exclusions must leave out.
//
//go:embed all:demo/workspace
var demoFiles embed.FS

// newDemoCmd is `agent-runner demo`.
func newDemoCmd() *cobra.Command {
	var storeDir, backendKind string
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run the built-in example job (a Python test suite) and print its result",
		Long: "Demo unpacks a small embedded Python project, runs `python3 -m unittest` on it through the\n" +
			"full pipeline (policy, snapshot, backend, capture, artifacts, run record) and prints the\n" +
			"RunJobResult. It uses linux_sandbox when that backend is available, else local_process.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ws, err := os.MkdirTemp("", "agent-runner-demo-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(ws)
			if err := unpackDemo(ws); err != nil {
				return err
			}
			if backendKind == "" {
				backendKind = demoBackend(cmd.Context())
			}
			req := demoRequest(ws, backendKind)
			r, err := newRunner(storeDir, "")
			if err != nil {
				return err
			}
			ctx, stop := signalContext()
			defer stop()
			res, err := r.Run(ctx, req, runner.Options{Attempt: 1})
			if err != nil {
				return err
			}
			if err := writeResult("", res); err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "demo: %s on %s; record in %s\n", res.Status, res.Backend, r.Store().RunDir(res.JobID))
			return nil
		},
	}
	cmd.Flags().StringVar(&storeDir, "store-dir", defaultStoreDir, "run store directory")
	cmd.Flags().StringVar(&backendKind, "backend", "", "backend kind (default: linux_sandbox if available, else local_process)")
	return cmd
}

func unpackDemo(dst string) error {
	root, _ := fs.Sub(demoFiles, "demo/workspace")
	return fs.WalkDir(root, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		target := filepath.Join(dst, filepath.FromSlash(p))
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := fs.ReadFile(root, p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
}

// demoBackend picks linux_sandbox, or says loudly why the demo runs
// without isolation instead (the demo's own embedded code is trusted; a
// request that names linux_sandbox never runs anywhere else).
func demoBackend(ctx context.Context) string {
	if ctx == nil {
		ctx = context.Background()
	}
	b, ok := backend.Lookup("linux_sandbox")
	if !ok {
		fmt.Fprintln(os.Stderr, "demo: WARNING: linux_sandbox is not built in; running the demo on local_process, with no isolation")
		return "local_process"
	}
	if err := b.Available(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "demo: WARNING: linux_sandbox is unavailable here (%v); running the demo on local_process, with no isolation (run `agent-runner demo --backend linux_sandbox` to require it)\n", err)
		return "local_process"
	}
	return "linux_sandbox"
}

func demoRequest(ws, kind string) job.Request {
	trace, _ := json.Marshal(map[string]string{"trace_id": "tr_demo", "agent_id": "agent-runner-demo"})
	return job.Request{
		Trace:     job.Trace(trace),
		Workspace: job.Workspace{Path: ws},
		Command:   job.Command{Argv: []string{"python3", "-m", "unittest", "-v"}, Env: map[string]string{"PYTHONDONTWRITEBYTECODE": "1"}},
		Policy: job.Policy{
			AllowedCommands: []job.CommandRule{{Basename: "python3", Path: "/usr/bin/python3"}},
			AllowedEnv:      []string{"PYTHONDONTWRITEBYTECODE"},
			ArtifactGlobs:   []string{"reports/**"},
		},
		Limits:  job.Limits{TimeoutMS: 60_000, MemoryMB: 512},
		Backend: job.BackendSpec{Kind: kind},
	}
}
