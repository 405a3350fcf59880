package session

import (
	"maps"
	"slices"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/store"
)

// Template is a kind of sandbox the operator names (serve's
// --sandbox-templates): the defaults of a create that names it, and its
// warm pool. A create's own fields override the template's within the
// operator's maxima, which hold for both.
type Template struct {
	Backend string `json:"backend,omitempty"`
	// Image is the image of the template's sandboxes (CreateRequest.Image).
	Image   string      `json:"image,omitempty"`
	Limits  Limits      `json:"limits,omitempty"`
	Policy  *job.Policy `json:"policy,omitempty"`
	Network *Network    `json:"network,omitempty"`
	// Env is every exec's environment in the sandbox (an exec's own env
	// overrides a key); a create's env adds to it key by key.
	Env      map[string]string `json:"env,omitempty"`
	TimeoutS int64             `json:"timeout_s,omitempty"`
	// Pool is how many sandboxes of this template the service keeps
	// created and frozen for creates to claim (0: none, every create
	// cold-starts).
	Pool int `json:"pool,omitempty"`
}

// MaxPool bounds one template's pool.
const MaxPool = 256

// apply fills what req leaves out from t: a request field that is set
// wins (limits field by field, env key by key).
func (t Template) apply(req CreateRequest) CreateRequest {
	if req.Backend == "" {
		req.Backend = t.Backend
	}
	if req.Image == "" {
		req.Image = t.Image
	}
	l := &req.Limits
	if l.MemoryMB == 0 {
		l.MemoryMB = t.Limits.MemoryMB
	}
	if l.CPUCount == 0 {
		l.CPUCount = t.Limits.CPUCount
	}
	if l.MaxProcesses == 0 {
		l.MaxProcesses = t.Limits.MaxProcesses
	}
	if l.TmpMB == 0 {
		l.TmpMB = t.Limits.TmpMB
	}
	if req.Policy == nil && t.Policy != nil {
		p := *t.Policy
		req.Policy = &p
	}
	if req.Network == nil && t.Network != nil {
		n := Network{Mode: t.Network.Mode, AllowedHosts: slices.Clone(t.Network.AllowedHosts)}
		req.Network = &n
	}
	if len(t.Env) > 0 {
		env := maps.Clone(t.Env)
		maps.Copy(env, req.Env)
		req.Env = env
	}
	if req.TimeoutS == 0 {
		req.TimeoutS = t.TimeoutS
	}
	return req
}

// withTemplate is req with its template's defaults, or
// validation.invalid_request (422, details.field "template") for a
// template the operator did not define.
func (s *Service) withTemplate(req CreateRequest) (CreateRequest, error) {
	if req.Template == "" {
		return req, nil
	}
	t, ok := s.cfg.Templates[req.Template]
	if !ok {
		return req, job.Errorf(job.CodeInvalidRequest, "template %q is not defined on this server", req.Template).
			With("field", "template").With("templates", slices.Sorted(maps.Keys(s.cfg.Templates)))
	}
	return t.apply(req), nil
}

// checkTemplates admits each template as a create would be (so a
// template beyond the operator's maxima or settings fails at start, not
// at its first create) and checks its name and pool size.
func (s *Service) checkTemplates() error {
	for name, t := range s.cfg.Templates {
		bad := func(err error) error {
			return job.Wrap(job.CodeInvalidRequest, err, "sandbox template "+name+": "+err.Error()).With("template", name)
		}
		if !store.ValidID(name) {
			return bad(job.Errorf(job.CodeInvalidRequest, "a template's name is an id (^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$)"))
		}
		if t.Pool < 0 || t.Pool > MaxPool {
			return bad(job.Errorf(job.CodeInvalidRequest, "pool must be between 0 and %d", MaxPool))
		}
		if _, _, _, err := s.admit(t.apply(CreateRequest{Template: name})); err != nil {
			return bad(err)
		}
	}
	return nil
}

// HasTemplate reports whether the operator defined template name.
func (s *Service) HasTemplate(name string) bool {
	_, ok := s.cfg.Templates[name]
	return ok
}
