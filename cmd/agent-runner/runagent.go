package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/agent-runner/agent-runner/agent/launch"
	"github.com/agent-runner/agent-runner/agent/loop"
	"github.com/agent-runner/agent-runner/agent/model"
	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
)

// runAgentFlags are shared by run-agent and run-agent-mock.
type runAgentFlags struct {
	manifest, prompt, message, runsDir string
	model, modelName, baseURL, mockDir string
	backend                            string
	maxTokens                          int
	asJSON, unsafeLocal                bool
	network                            egressFlags
}

func newRunAgentCmd(name, fixedModel string) *cobra.Command {
	var f runAgentFlags
	short := "Run an agent loop: a model proposes tool calls, the gateway enforces the manifest"
	if fixedModel != "" {
		short = "Run the agent loop with the deterministic mock model (seed spelling of run-agent --model mock)"
	}
	cmd := &cobra.Command{
		Use:   name + " --manifest FILE --prompt FILE --message TEXT",
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if fixedModel != "" {
				f.model = fixedModel
			}
			prompt := ""
			if f.prompt != "" {
				b, err := os.ReadFile(f.prompt)
				if err != nil {
					return job.Wrap(job.CodeInvalidRequest, err, "cannot read --prompt").With("path", f.prompt)
				}
				prompt = string(b)
			}
			// Build the client first so a flag mistake leaves no run behind;
			// the mock's directory is filled in from the manifest below.
			client, err := f.client()
			if err != nil {
				return err
			}
			kind, err := checkBackendFlag(backend.Defaults(), "backend", f.backend, f.unsafeLocal)
			if err != nil {
				return err
			}
			opts, err := toolOptions(f.runsDir, kind, &f.network)
			if err != nil {
				return err
			}
			s, err := launch.Open(cmd.Context(), f.manifest, "agent:"+f.model, opts)
			if err != nil {
				return err
			}
			defer s.Close()
			if m, ok := client.(*model.Mock); ok && m.Dir == "" && len(s.Manifest.Capabilities.Filesystem.Read) > 0 {
				m.Dir = s.Manifest.Capabilities.Filesystem.Read[0]
			}
			sum, err := loop.Run(cmd.Context(), s, loop.Config{Client: client, Prompt: prompt, Message: f.message})
			if perr := printRunSummary(cmd, sum, f.asJSON); perr != nil {
				return perr
			}
			return err
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.manifest, "manifest", "", "agent manifest (YAML, or JSON by extension)")
	fl.StringVar(&f.prompt, "prompt", "", "system prompt file (markdown or text)")
	fl.StringVar(&f.message, "message", "", "the user's request")
	fl.StringVar(&f.runsDir, "runs-dir", defaultAgentRunsDir, "directory for run directories")
	fl.BoolVar(&f.asJSON, "json", false, "print summary.json instead of text")
	fl.StringVar(&f.mockDir, "mock-dir", "", "directory the mock model inspects (default: the manifest's first read root)")
	addToolBackendFlags(cmd, &f.backend, &f.unsafeLocal, &f.network)
	if fixedModel == "" {
		fl.StringVar(&f.model, "model", "mock", "model client: mock, openai or anthropic")
		fl.StringVar(&f.modelName, "model-name", "", "model id (default $OPENAI_MODEL or $ANTHROPIC_MODEL)")
		fl.StringVar(&f.baseURL, "base-url", "", "API base URL (default $OPENAI_BASE_URL / $ANTHROPIC_BASE_URL, else the vendor's)")
		fl.IntVar(&f.maxTokens, "max-tokens", 0, "max output tokens per reply (anthropic default 4096)")
	}
	cmd.MarkFlagRequired("manifest")
	cmd.MarkFlagRequired("message")
	return cmd
}

// client builds the model client. API keys come only from the
// environment and are never written to any record.
func (f *runAgentFlags) client() (model.Client, error) {
	pick := func(flag, env string) string {
		if flag != "" {
			return flag
		}
		return os.Getenv(env)
	}
	switch f.model {
	case "mock":
		return &model.Mock{Dir: f.mockDir}, nil
	case "openai":
		name := pick(f.modelName, "OPENAI_MODEL")
		if name == "" {
			return nil, usageError{errString("--model openai needs --model-name or $OPENAI_MODEL")}
		}
		return &model.OpenAI{BaseURL: pick(f.baseURL, "OPENAI_BASE_URL"), APIKey: os.Getenv("OPENAI_API_KEY"), Model: name, MaxTokens: f.maxTokens}, nil
	case "anthropic":
		name := pick(f.modelName, "ANTHROPIC_MODEL")
		if name == "" {
			return nil, usageError{errString("--model anthropic needs --model-name or $ANTHROPIC_MODEL")}
		}
		key := os.Getenv("ANTHROPIC_API_KEY")
		if key == "" {
			return nil, usageError{errString("--model anthropic needs $ANTHROPIC_API_KEY")}
		}
		return &model.Anthropic{BaseURL: pick(f.baseURL, "ANTHROPIC_BASE_URL"), APIKey: key, Model: name, MaxTokens: f.maxTokens}, nil
	}
	return nil, usageError{errString("--model must be mock, openai or anthropic")}
}
