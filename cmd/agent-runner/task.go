package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agent-runner/agent-runner/client"
	"github.com/agent-runner/agent-runner/job"
)

// taskClient calls a server's /api/v1/tasks routes.
type taskClient struct{ sf serverFlags }

func (c *taskClient) do(ctx context.Context, method, path, ctype string, body io.Reader) (*http.Response, error) {
	return client.New(c.sf.url, c.sf.token).Do(ctx, method, path, ctype, body, nil)
}

func (c *taskClient) printJSON(ctx context.Context, method, path string) (map[string]any, error) {
	resp, err := c.do(ctx, method, path, "", nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var v map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		return nil, err
	}
	return v, writeResult("", v)
}

// newTaskCmd is `agent-runner task` and its verbs, clients of a server's
// task API.
func newTaskCmd() *cobra.Command {
	taskCmd := &cobra.Command{Use: "task", Short: "Submit and follow long-running agent tasks on a server (see docs/tasks.md)"}
	var c taskClient
	c.sf.add(taskCmd)
	taskCmd.PersistentFlags().AddFlagSet(taskCmd.Flags())

	taskCmd.AddCommand(&cobra.Command{
		Use: "submit MANIFEST.yaml", Short: "Submit a task manifest", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := readInput(args[0])
			if err != nil {
				return err
			}
			resp, err := c.do(cmd.Context(), http.MethodPost, "/api/v1/tasks", "application/yaml", strings.NewReader(string(data)))
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			_, err = io.Copy(os.Stdout, resp.Body)
			return err
		},
	})
	var stateFilter, label string
	list := &cobra.Command{
		Use: "list", Short: "List tasks", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q := url.Values{}
			if stateFilter != "" {
				q.Set("state", stateFilter)
			}
			if label != "" {
				q.Set("label", label)
			}
			_, err := c.printJSON(cmd.Context(), http.MethodGet, "/api/v1/tasks?"+q.Encode())
			return err
		},
	}
	list.Flags().StringVar(&stateFilter, "state", "", "comma-separated states")
	list.Flags().StringVar(&label, "label", "", "key=value")
	taskCmd.AddCommand(list)
	var watch bool
	status := &cobra.Command{
		Use: "status TASK_ID", Short: "Print a task's status (--watch: until it ends)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			for {
				v, err := c.printJSON(cmd.Context(), http.MethodGet, "/api/v1/tasks/"+url.PathEscape(args[0]))
				if err != nil || !watch || terminalTask(v["state"]) {
					return err
				}
				time.Sleep(time.Second)
			}
		},
	}
	status.Flags().BoolVar(&watch, "watch", false, "repeat until the task ends")
	taskCmd.AddCommand(status)
	var follow bool
	logs := &cobra.Command{
		Use: "logs TASK_ID", Short: "Print a task's output (--follow: stream until it ends)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if !follow {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, 2*time.Second) // what exists now
				defer cancel()
			}
			final, err := c.sf.client().TaskLogs(ctx, args[0], func(stream, line string) error {
				if stream == "stderr" {
					fmt.Fprintln(os.Stderr, line)
				} else {
					fmt.Fprintln(os.Stdout, line)
				}
				return nil
			})
			if err != nil {
				if !follow && ctx.Err() != nil {
					return nil // printed what exists now
				}
				return err
			}
			fmt.Fprintf(os.Stderr, "agent-runner: task %s is %s\n", args[0], final.State)
			return nil
		},
	}
	logs.Flags().BoolVarP(&follow, "follow", "f", false, "stream until the task ends")
	taskCmd.AddCommand(logs)
	var cancelWait time.Duration
	cancelCmd := &cobra.Command{
		Use: "cancel TASK_ID", Short: "Cancel a task and print its status once it has ended (or after --wait)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			resp, err := c.do(ctx, http.MethodDelete, "/api/v1/tasks/"+url.PathEscape(args[0]), "", nil)
			if err != nil {
				return err
			}
			resp.Body.Close()
			// The answer to DELETE is the state the cancel found; the
			// state it leads to comes a moment later.
			cl := c.sf.client()
			wctx, stop := context.WithTimeout(ctx, cancelWait)
			defer stop()
			if _, err := cl.WaitTask(wctx, args[0], 100*time.Millisecond); err != nil && wctx.Err() == nil {
				return err
			}
			_, err = c.printJSON(ctx, http.MethodGet, "/api/v1/tasks/"+url.PathEscape(args[0]))
			return err
		},
	}
	cancelCmd.Flags().DurationVar(&cancelWait, "wait", 30*time.Second, "how long to wait for the task to end before printing its status")
	taskCmd.AddCommand(cancelCmd)
	taskCmd.AddCommand(&cobra.Command{
		Use: "artifacts TASK_ID", Short: "List a finished task's artifacts with checksums", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, err := c.printJSON(cmd.Context(), http.MethodGet, "/api/v1/tasks/"+url.PathEscape(args[0])+"/artifacts")
			return err
		},
	})
	var out string
	download := &cobra.Command{
		Use: "download TASK_ID NAME", Short: "Download one artifact (to --out, or stdout)", Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			resp, err := c.do(cmd.Context(), http.MethodGet, "/api/v1/tasks/"+url.PathEscape(args[0])+"/artifacts/"+args[1], "", nil)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			w := io.Writer(os.Stdout)
			if out != "" {
				f, err := os.Create(out)
				if err != nil {
					return job.Wrap(job.CodeRunIOFailed, err, "cannot write --out")
				}
				defer f.Close()
				w = f
			}
			_, err = io.Copy(w, resp.Body)
			return err
		},
	}
	download.Flags().StringVar(&out, "out", "", "file to write")
	taskCmd.AddCommand(download)
	taskCmd.AddCommand(&cobra.Command{
		Use: "destroy TASK_ID", Short: "Remove a finished task's preserved workspace (logs and artifacts stay)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, err := c.printJSON(cmd.Context(), http.MethodPost, "/api/v1/tasks/"+url.PathEscape(args[0])+"/destroy")
			return err
		},
	})
	taskCmd.AddCommand(newTaskShellCmd())
	return taskCmd
}

func terminalTask(s any) bool {
	switch s {
	case "completed", "failed", "failed_preserved", "cancelled":
		return true
	}
	return false
}
