package launch

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/agent-runner/agent-runner/job"
)

// Task is a scripted task file.
type Task struct {
	Description string `json:"description,omitempty" yaml:"description"`
	Steps       []Step `json:"steps" yaml:"steps"`
}

// Step is one tool call; Args defaults to {}.
type Step struct {
	Tool string          `json:"tool" yaml:"tool"`
	Args json.RawMessage `json:"args,omitempty" yaml:"-"`
}

// LoadTask reads a task: YAML when the extension is .yaml or .yml, JSON
// otherwise (the seed's rule).
func LoadTask(path string) (*Task, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, job.Wrap(job.CodeInvalidRequest, err, "cannot read task").With("path", path)
	}
	ext := strings.ToLower(filepath.Ext(path))
	if ext == ".yaml" || ext == ".yml" {
		return ParseTaskYAML(data)
	}
	return ParseTaskJSON(data)
}

// ParseTaskJSON parses a JSON task strictly.
func ParseTaskJSON(data []byte) (*Task, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var t Task
	if err := dec.Decode(&t); err != nil {
		return nil, job.Wrap(job.CodeInvalidRequest, err, "task is not valid JSON")
	}
	return &t, checkTask(&t)
}

// ParseTaskYAML parses a YAML task; args are converted to JSON.
func ParseTaskYAML(data []byte) (*Task, error) {
	var raw struct {
		Description string `yaml:"description"`
		Steps       []struct {
			Tool string         `yaml:"tool"`
			Args map[string]any `yaml:"args"`
		} `yaml:"steps"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&raw); err != nil {
		return nil, job.Wrap(job.CodeInvalidRequest, err, "task is not valid YAML")
	}
	t := &Task{Description: raw.Description}
	for _, s := range raw.Steps {
		args, err := json.Marshal(s.Args)
		if err != nil {
			return nil, job.Wrap(job.CodeInvalidRequest, err, "task step args")
		}
		t.Steps = append(t.Steps, Step{Tool: s.Tool, Args: args})
	}
	return t, checkTask(t)
}

func checkTask(t *Task) error {
	for i := range t.Steps {
		if t.Steps[i].Tool == "" {
			return job.Errorf(job.CodeInvalidRequest, "steps[%d].tool must not be empty", i)
		}
		if len(t.Steps[i].Args) == 0 || string(t.Steps[i].Args) == "null" {
			t.Steps[i].Args = json.RawMessage(`{}`)
		}
	}
	return nil
}

// Scripted runs task under the manifest at manifestPath: each step goes
// through the gateway in order; denials and failures are recorded and the
// run goes on. The run stops early at max_tool_calls or max_runtime.
func Scripted(ctx context.Context, manifestPath string, task *Task, o Options) (Summary, error) {
	s, err := Open(ctx, manifestPath, ModeScripted, o)
	if err != nil {
		return Summary{}, err
	}
	defer s.Close()
	return s.RunTask(ctx, task)
}

// ModeScripted is the mode Scripted opens its session with (run_start
// and summary.json).
const ModeScripted = "scripted"

// RunTask walks task's steps through s's gateway like Scripted, for a
// session the caller opened (with ModeScripted), and finishes it.
func (s *Session) RunTask(ctx context.Context, task *Task) (Summary, error) {
	ctx, cancel := context.WithTimeout(ctx, s.Policy.Limits.MaxRuntime())
	defer cancel()
	reason := ExitCompleted
	for _, st := range task.Steps {
		if ctx.Err() != nil {
			break
		}
		if _, err := s.Call(ctx, st.Tool, st.Args); LimitReached(err) {
			reason = ExitMaxToolCalls
			break
		}
	}
	if r := ctxReason(ctx); r != "" {
		reason = r
	}
	return s.Finish(reason, "")
}

// ctxReason maps a finished context to an exit reason ("" when live).
func ctxReason(ctx context.Context) string {
	switch ctx.Err() {
	case context.DeadlineExceeded:
		return ExitMaxRuntime
	case context.Canceled:
		return ExitCanceled
	}
	return ""
}
