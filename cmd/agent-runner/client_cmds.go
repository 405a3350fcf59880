package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/agent-runner/agent-runner/client"
)

// serverFlags are shared by the client verbs.
type serverFlags struct {
	url   string
	token string
}

func (s *serverFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&s.url, "server", envOr("AGENT_RUNNER_URL", "http://127.0.0.1:3000"), "server URL (env AGENT_RUNNER_URL)")
	cmd.Flags().StringVar(&s.token, "token", os.Getenv("AGENT_RUNNER_TOKEN"), "bearer token (env AGENT_RUNNER_TOKEN)")
}

func (s *serverFlags) client() *client.Client { return client.New(s.url, s.token) }

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func init() {
	var sf serverFlags
	var requestPath string
	var wait bool
	submit := &cobra.Command{
		Use:   "submit --request FILE|-",
		Short: "Submit a RunJobRequest to a server; prints {job_id, status} (or the result with --wait)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			data, err := readInput(requestPath)
			if err != nil {
				return err
			}
			ctx, stop := signalContext()
			defer stop()
			c := sf.client()
			acc, err := c.Submit(ctx, data)
			if err != nil {
				return err
			}
			if !wait {
				return writeResult("", acc)
			}
			res, err := c.Wait(ctx, acc.JobID, 0)
			if err != nil {
				return err
			}
			return writeResult("", res)
		},
	}
	sf.add(submit)
	submit.Flags().StringVar(&requestPath, "request", "-", "RunJobRequest JSON file, or - for stdin")
	submit.Flags().BoolVar(&wait, "wait", false, "wait for the result and print it")
	rootCmd.AddCommand(submit)

	rootCmd.AddCommand(jobVerb("status JOB_ID", "Print a job's status, or its result once terminal", func(ctx context.Context, c *client.Client, id string) error {
		st, err := c.Get(ctx, id)
		if err != nil {
			return err
		}
		if st.Result != nil {
			return writeResult("", st.Result)
		}
		return writeResult("", map[string]any{"job_id": st.JobID, "status": st.Status, "attempt": st.Attempt})
	}))
	var timeout time.Duration
	waitCmd := jobVerb("wait JOB_ID", "Wait for a job to finish and print its result", func(ctx context.Context, c *client.Client, id string) error {
		if timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, timeout)
			defer cancel()
		}
		res, err := c.Wait(ctx, id, 0)
		if err != nil {
			return err
		}
		return writeResult("", res)
	})
	waitCmd.Flags().DurationVar(&timeout, "timeout", 0, "give up after this long (0: never)")
	rootCmd.AddCommand(waitCmd)
	var follow bool
	logs := jobVerb("logs JOB_ID", "Print a job's stdout and stderr (live with --follow)", func(ctx context.Context, c *client.Client, id string) error {
		if !follow {
			res, err := c.Wait(ctx, id, 0)
			if err != nil {
				return err
			}
			os.Stdout.WriteString(res.Stdout.Text)
			os.Stderr.WriteString(res.Stderr.Text)
			return nil
		}
		return c.Follow(ctx, id, func(ev client.Event) error {
			switch ev.Type {
			case "stdout":
				os.Stdout.Write(ev.Bytes())
			case "stderr":
				os.Stderr.Write(ev.Bytes())
			case "status":
				fmt.Fprintf(os.Stderr, "agent-runner: %s is %s\n", id, ev.Status)
			}
			return nil
		})
	})
	logs.Flags().BoolVarP(&follow, "follow", "f", false, "stream output live until the job finishes")
	rootCmd.AddCommand(logs)
	rootCmd.AddCommand(jobVerb("cancel JOB_ID", "Cancel a queued or running job and print its status", func(ctx context.Context, c *client.Client, id string) error {
		st, err := c.Cancel(ctx, id)
		if err != nil {
			return err
		}
		if st.Result != nil {
			return writeResult("", st.Result)
		}
		return writeResult("", map[string]any{"job_id": st.JobID, "status": st.Status})
	}))
}

// jobVerb builds a client command taking one job id.
func jobVerb(use, short string, fn func(ctx context.Context, c *client.Client, id string) error) *cobra.Command {
	var sf serverFlags
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signalContext()
			defer stop()
			return fn(ctx, sf.client(), args[0])
		},
	}
	sf.add(cmd)
	return cmd
}
