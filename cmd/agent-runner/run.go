package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/agent-runner/agent-runner/buildcache"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/runner"
	"github.com/agent-runner/agent-runner/validation"
)

const defaultStoreDir = "agent-runner-runs"

// newRunner builds the runner the CLI commands share.
func newRunner(storeDir, backendKind string) (*runner.Runner, error) {
	return runner.New(runner.Config{StoreDir: storeDir, DefaultBackend: validation.NormalizeKind(backendKind)})
}

// signalContext is canceled on SIGINT or SIGTERM, so a job is killed and
// recorded as canceled instead of orphaned.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// newRunCmd is `agent-runner run`.
func newRunCmd() *cobra.Command {
	var requestPath, storeDir, backendKind, out string
	var network egressFlags
	var view sandboxFlags
	var images imageStoreFlags
	cmd := &cobra.Command{
		Use:   "run --request FILE|-",
		Short: "Run one RunJobRequest and print its RunJobResult",
		Long: "Run validates the request, decides policy, snapshots the workspace, runs the command on the\n" +
			"chosen backend and prints the RunJobResult. It exits 0 whenever a result was produced,\n" +
			"including non-zero command exits, policy denials and timeouts.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if requestPath == "" {
				return usageError{errString("--request is required")}
			}
			data, err := readInput(requestPath)
			if err != nil {
				return err
			}
			req, err := job.DecodeRequest(data)
			if err != nil {
				return err
			}
			if backendKind != "" {
				req.Backend.Kind = validation.NormalizeKind(backendKind)
			}
			backends, err := view.backends(storeDir)
			if err != nil {
				return err
			}
			cfg := runner.Config{StoreDir: storeDir, Backends: backends}
			if req.Backend.Image != "" {
				// The image store beside the run store (serve's), opened only
				// for a job that names an image.
				images.storeDir = storeDir
				s, err := images.open()
				if err != nil {
					return err
				}
				cfg.Images = s
			}
			if err := network.runnerConfig(&cfg, nil, nil); err != nil {
				return err
			}
			r, err := runner.New(cfg)
			if err != nil {
				return err
			}
			// After the result is out, wait for the trims of the job's
			// build caches (they run in the background).
			defer r.Close()
			ctx, stop := signalContext()
			defer stop()
			// The CLI's caller is this host's user: its caches are local.
			res, err := r.Run(ctx, *req, runner.Options{Attempt: 1, CacheNamespace: buildcache.LocalNamespace})
			if err != nil {
				return err
			}
			return writeResult(out, res)
		},
	}
	cmd.Flags().StringVar(&requestPath, "request", "", "RunJobRequest JSON file, or - for stdin")
	cmd.Flags().StringVar(&storeDir, "store-dir", defaultStoreDir, "run store directory")
	cmd.Flags().StringVar(&backendKind, "backend", "", "override backend.kind (local_process, linux_sandbox, ...)")
	cmd.Flags().StringVar(&out, "out", "", "write the result to this file instead of stdout")
	network.register(cmd.Flags())
	view.register(cmd.Flags())
	images.register(cmd.Flags(), false)
	return cmd
}
