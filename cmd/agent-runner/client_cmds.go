package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/agent-runner/agent-runner/client"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/validation"
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

// newJobCmds are the job verbs of a server's client: submit, status,
// wait, logs and cancel.
func newJobCmds() []*cobra.Command {
	var cmds []*cobra.Command
	var sf serverFlags
	var requestPath, backendKind string
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
			if backendKind != "" {
				if data, err = withBackend(data, backendKind); err != nil {
					return err
				}
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
	submit.Flags().StringVar(&backendKind, "backend", "", "override backend.kind (linux_sandbox, local_process, ...)")
	cmds = append(cmds, submit)

	cmds = append(cmds, jobVerb("status JOB_ID", "Print a job's status, or its result once terminal", func(ctx context.Context, c *client.Client, id string) error {
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
			if timeout > 0 && ctx.Err() != nil {
				// The server was reached; the job is just not done.
				return job.Errorf(job.CodeNotTerminal, "job %s has not finished after %s", id, timeout).With("job_id", id)
			}
			return err
		}
		return writeResult("", res)
	})
	waitCmd.Flags().DurationVar(&timeout, "timeout", 0, "give up after this long (0: never)")
	cmds = append(cmds, waitCmd)
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
	cmds = append(cmds, logs)
	cmds = append(cmds, jobVerb("cancel JOB_ID", "Cancel a queued or running job and print its status", func(ctx context.Context, c *client.Client, id string) error {
		st, err := c.Cancel(ctx, id)
		if err != nil {
			return err
		}
		if st.Result != nil {
			return writeResult("", st.Result)
		}
		return writeResult("", map[string]any{"job_id": st.JobID, "status": st.Status})
	}))
	return cmds
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

// withBackend sets backend.kind in a raw request, keeping the rest of it
// (and of its backend object) as sent.
func withBackend(data []byte, kind string) ([]byte, error) {
	var req map[string]any
	if err := json.Unmarshal(data, &req); err != nil {
		return nil, job.Errorf(job.CodeInvalidRequest, "request is not a JSON object: %v", err)
	}
	b, _ := req["backend"].(map[string]any)
	if b == nil {
		b = map[string]any{}
	}
	b["kind"] = validation.NormalizeKind(kind)
	req["backend"] = b
	return json.Marshal(req)
}

// newListCmd is `agent-runner list`: a server's jobs, a page at a time.
func newListCmd() *cobra.Command {
	var sf serverFlags
	var status, cursor string
	var limit int
	list := &cobra.Command{
		Use:   "list",
		Short: "List the server's jobs (oldest first; --status to filter, --cursor for the next page)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q := url.Values{}
			if status != "" {
				q.Set("status", status)
			}
			if cursor != "" {
				q.Set("cursor", cursor)
			}
			if limit > 0 {
				q.Set("limit", strconv.Itoa(limit))
			}
			path := "/v1/jobs"
			if len(q) > 0 {
				path += "?" + q.Encode()
			}
			resp, err := sf.client().Do(cmd.Context(), http.MethodGet, path, "", nil, nil)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			var page any
			if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
				return job.Wrap(job.CodeRunIOFailed, err, "the server's answer is not JSON")
			}
			return writeResult("", page)
		},
	}
	sf.add(list)
	list.Flags().StringVar(&status, "status", "", "only jobs in these statuses (comma list: queued,running,completed,...)")
	list.Flags().StringVar(&cursor, "cursor", "", "next_cursor of the previous page")
	list.Flags().IntVar(&limit, "limit", 0, "jobs per page (1..1000; default the server's)")
	return list
}
