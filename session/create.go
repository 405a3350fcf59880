package session

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"time"

	"github.com/agent-runner/agent-runner/egress"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/runner"
	"github.com/agent-runner/agent-runner/snapshot"
	"github.com/agent-runner/agent-runner/store"
)

// CreateRequest is a sandbox to create (POST /v1/sandboxes).
type CreateRequest struct {
	// ID names it; empty mints "sbx_<16 hex>". A repeated create of an
	// id with the same request answers the sandbox it made; another
	// request is job.conflict.
	ID string `json:"id,omitempty"`
	// Template names the operator's template whose defaults fill what
	// the request leaves out, and whose warm pool it may claim from.
	Template string `json:"template,omitempty"`
	// Image names the image (name:tag, or sha256:<hex>) the sandbox's
	// root is made of, from the server's image store, instead of the
	// host's view: its processes run as the image's user, root of the
	// sandbox's own user namespace by default. A server without an
	// image store, or a backend that runs no images, refuses it
	// (validation.invalid_request, field image: admit.go).
	Image     string            `json:"image,omitempty"`
	Backend   string            `json:"backend,omitempty"`
	Workspace *Workspace        `json:"workspace,omitempty"`
	Limits    Limits            `json:"limits,omitempty"`
	Policy    *job.Policy       `json:"policy,omitempty"`
	Network   *Network          `json:"network,omitempty"`
	TimeoutS  int64             `json:"timeout_s,omitempty"`
	Metadata  map[string]string `json:"metadata,omitempty"`
	// Env is every process's default environment (env.go); Secrets
	// names secrets of the operator's secrets file its processes see
	// as placeholders (secrets.go).
	Env     map[string]string `json:"env,omitempty"`
	Secrets []string          `json:"secrets,omitempty"`
	// IdleTimeoutS and AutoPause: idle.go.
	IdleTimeoutS int64 `json:"idle_timeout_s,omitempty"`
	AutoPause    bool  `json:"auto_pause,omitempty"`
	// OnTimeout and AutoResume: timeout.go.
	OnTimeout  string `json:"on_timeout,omitempty"`
	AutoResume bool   `json:"auto_resume,omitempty"`
}

// Create creates a sandbox and returns its record (running) and whether
// this call created it. A sandbox that cannot be built is recorded
// failed, with the error returned.
func (s *Service) Create(ctx context.Context, req CreateRequest) (Record, bool, error) {
	full, err := s.withTemplate(req)
	if err != nil {
		return Record{}, false, err
	}
	rec, spec, rules, err := s.admit(full)
	if err != nil {
		return Record{}, false, err
	}
	rec.Template = req.Template
	digest, err := requestDigest(req)
	if err != nil {
		return Record{}, false, err
	}
	if s.cfg.Records.Exists(rec.ID) {
		// The id is taken: the same request answers its sandbox,
		// another is job.conflict (Claim writes nothing here).
		if _, err := s.cfg.Records.Claim(rec.ID, digest, nil); err != nil {
			return Record{}, false, err
		}
		got, err := s.Get(rec.ID)
		return got, false, err
	}
	c := claimOf(ctx, rec)
	it, why, err := s.take(req.Template, full, spec, c)
	if err != nil {
		return Record{}, false, err
	}
	if it == nil {
		if err := s.reserve(c); err != nil {
			return Record{}, false, err
		}
	}
	defer s.release(c)
	rec.Start, rec.StartReason = StartWarm, why
	if it == nil {
		rec.Start = StartCold
	}
	created, err := s.cfg.Records.Claim(rec.ID, digest, func(dir string) error {
		b, err := json.MarshalIndent(rec, "", "  ")
		if err != nil {
			return job.Wrap(job.CodeInternal, err, "cannot encode a session record")
		}
		return os.WriteFile(filepath.Join(dir, recordFile), append(b, '\n'), store.RecordFileMode)
	})
	if err != nil || !created {
		if it != nil {
			s.giveBack(req.Template, it)
		}
		if err != nil {
			return Record{}, false, err
		}
		got, err := s.Get(rec.ID)
		return got, false, err
	}
	s.publish(rec)
	by := ownerOf(ctx)
	log, err := s.openAudit(rec.ID)
	var h *handle
	if err == nil {
		h, err = s.build(ctx, &rec, it, spec, rules)
	} else if it != nil {
		s.giveBack(req.Template, it)
	}
	if err != nil {
		ended(&rec, StateFailed, s.now(), job.AsError(err))
		if werr := s.save(rec); werr != nil {
			s.cfg.Logger.Warn("cannot record a sandbox's failure", "id", rec.ID, "error", werr)
		}
		if log != nil {
			if aerr := auditCreate(log, rec, by, err); aerr != nil {
				s.cfg.Logger.Warn("cannot record a sandbox's create in its audit log", "id", rec.ID, "error", aerr)
			}
			s.endAudit(log, rec, "")
		}
		s.removeWorkspace(rec.ID)
		return Record{}, false, err
	}
	rec.State, rec.UpdatedAt = StateRunning, s.now()
	h.rec, h.claim, h.audit = rec, c, log
	s.mu.Lock()
	s.live[rec.ID] = h
	s.mu.Unlock()
	err = auditCreate(log, rec, by, nil)
	if err == nil {
		err = s.save(rec)
	}
	if err != nil {
		s.end(s.handle(rec.ID), StateFailed, job.AsError(err))
		return Record{}, false, err
	}
	return rec, true, nil
}

// start builds sandbox rec: its egress bridge (an allowlist's), its
// workspace and the run service's sandbox. On an error nothing of it is
// left running.
func (s *Service) start(ctx context.Context, rec Record, spec runner.SandboxSpec, rules []egress.Rule) (*handle, error) {
	spec.Workspace = filepath.Join(s.cfg.Records.Path(rec.ID), workspaceDir)
	stop := func() {}
	var secretEnv map[string]string
	if rules != nil {
		bridge, env, closeBridge, err := s.openEgress(rec, rules)
		if err != nil {
			return nil, err
		}
		spec.Egress, stop, secretEnv = bridge, closeBridge, env
	}
	sb, err := s.open(ctx, rec, spec)
	if err != nil {
		stop()
		return nil, err
	}
	return &handle{sb: sb, stop: stop, secretEnv: secretEnv}, nil
}

// open fills the sandbox's workspace (a copy of workspace.path, a clone
// of workspace.repository, else empty) and opens the sandbox on the run service.
func (s *Service) open(ctx context.Context, rec Record, spec runner.SandboxSpec) (*runner.Sandbox, error) {
	if src := rec.Workspace.Path; src != "" {
		if _, err := snapshot.Copy(ctx, src, spec.Workspace, snapshot.Options{}); err != nil {
			return nil, err
		}
	} else if rec.Workspace.Repository != "" {
		if err := s.cloneWorkspace(ctx, rec.ID, rec.Workspace, spec.Workspace); err != nil {
			return nil, err
		}
	} else if err := os.Mkdir(spec.Workspace, 0o755); err != nil {
		return nil, job.Wrap(job.CodeRunIOFailed, err, "cannot create the sandbox's workspace")
	}
	return s.cfg.Runner.OpenSandbox(ctx, spec)
}

// removeWorkspace removes an ended sandbox's workspace (its record
// stays until retention).
func (s *Service) removeWorkspace(id string) {
	if err := os.RemoveAll(filepath.Join(s.cfg.Records.Path(id), workspaceDir)); err != nil {
		s.cfg.Logger.Warn("cannot remove an ended sandbox's workspace", "id", id, "error", err)
	}
}

// newID mints a sandbox id.
func newID() string {
	var b [8]byte
	rand.Read(b[:])
	return "sbx_" + hex.EncodeToString(b[:])
}

// requestDigest identifies a create request for its id's claim.
func requestDigest(req CreateRequest) (string, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return "", job.Wrap(job.CodeInternal, err, "cannot encode a create request")
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// expiry is when a sandbox given timeout at now expires.
func expiry(now time.Time, timeoutS int64) time.Time {
	return now.Add(time.Duration(timeoutS) * time.Second)
}
