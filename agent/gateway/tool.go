package gateway

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/agent-runner/agent-runner/job"
)

// tool is one registered tool: its schema comes from the Go args type and
// plan decodes args and checks policy without doing I/O.
type tool struct {
	name        string
	description string
	schema      json.RawMessage
	plan        func(g *Gateway, args json.RawMessage) (func(context.Context) (any, error), *job.Error)
}

// define builds a tool from a typed check function.
func define[A any, R any](name, description string, check func(g *Gateway, a *A) (func(context.Context) (R, error), *job.Error)) tool {
	return tool{
		name:        name,
		description: description,
		schema:      schemaFor[A](),
		plan: func(g *Gateway, raw json.RawMessage) (func(context.Context) (any, error), *job.Error) {
			var a A
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&a); err != nil {
				return nil, job.Wrap(job.CodeInvalidRequest, err, "invalid arguments for "+name).With("tool", name)
			}
			if dec.More() {
				return nil, job.Errorf(job.CodeInvalidRequest, "invalid arguments for %s: trailing data", name).With("tool", name)
			}
			run, err := check(g, &a)
			if err != nil {
				return nil, err.With("tool", name)
			}
			return func(ctx context.Context) (any, error) { return run(ctx) }, nil
		},
	}
}

func toolByName(name string) (tool, bool) {
	for _, t := range tools {
		if t.name == name {
			return t, true
		}
	}
	return tool{}, false
}
