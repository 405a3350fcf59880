package taskapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/task/taskstore"
)

// ChildSocketName is the socket's file name inside its directory.
const ChildSocketName = "children.sock"

// ChildSocket returns the lifecycle hook that serves one running task's
// children API on a Unix socket: the directory is bound read-only into the
// task's sandbox and the agent finds the path in $AGENT_RUNNER_SOCKET.
// Every request must carry "Authorization: Bearer $AGENT_TASK_TOKEN"; the
// socket belongs to one parent, so a caller can create, see, download from
// and cancel only that parent's own children. The server holds at most
// ChildSocketConns connections and times out slow and idle ones.
//
//	POST   /v1/tasks                          submit a child (YAML, or JSON like /api/v1/tasks)
//	GET    /v1/tasks                          the parent's children
//	GET    /v1/tasks/{id}                     one child's status
//	DELETE /v1/tasks/{id}                     cancel a child
//	GET    /v1/tasks/{id}/artifacts           a child's artifacts
//	GET    /v1/tasks/{id}/artifacts/{name...} download one
func ChildSocket(s *taskstore.Store) func(parentID, tokenHash string) (string, func(), error) {
	return func(parentID, tokenHash string) (string, func(), error) {
		dir, err := os.MkdirTemp("", "agent-runner-children-")
		if err != nil {
			return "", nil, err
		}
		// The sandbox's uid must be able to reach the socket; the token,
		// not file modes, is the authentication.
		os.Chmod(dir, 0o755)
		sock := filepath.Join(dir, ChildSocketName)
		ln, err := net.Listen("unix", sock)
		if err != nil {
			os.RemoveAll(dir)
			return "", nil, err
		}
		os.Chmod(sock, 0o666)
		c := &children{api: &api{s: s}, parent: parentID, tokenHash: tokenHash}
		mux := http.NewServeMux()
		for _, r := range c.routes() {
			mux.HandleFunc(r.pattern, r.h)
		}
		srv := &http.Server{
			Handler:           c.authenticate(mux),
			ReadHeaderTimeout: childSocketReadHeaderTimeout,
			ReadTimeout:       childSocketReadTimeout,
			WriteTimeout:      childSocketWriteTimeout,
			IdleTimeout:       childSocketIdleTimeout,
			MaxHeaderBytes:    64 << 10,
		}
		go srv.Serve(newCapListener(ln, ChildSocketConns))
		return sock, func() { srv.Close(); os.RemoveAll(dir) }, nil
	}
}

// routes is the children socket's table (the doc comment of ChildSocket
// lists the same; the OpenAPI document describes it as its own server).
func (c *children) routes() []route {
	return []route{
		{"POST /v1/tasks", "", c.submit},
		{"GET /v1/tasks", "", c.list},
		{"GET /v1/tasks/{id}", "", c.own(c.api.get)},
		{"DELETE /v1/tasks/{id}", "", c.own(c.api.cancel)},
		{"GET /v1/tasks/{id}/artifacts", "", c.own(c.api.artifacts)},
		{"GET /v1/tasks/{id}/artifacts/{name...}", "", c.own(c.api.download)},
	}
}

// ChildPatterns lists the routes of the children socket ("METHOD /path").
func ChildPatterns() []string {
	var out []string
	for _, r := range (&children{api: &api{}}).routes() {
		out = append(out, r.pattern)
	}
	return out
}

type children struct {
	api       *api
	parent    string
	tokenHash string
}

func (c *children) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		sum := sha256.Sum256([]byte(tok))
		if !ok || subtle.ConstantTimeCompare([]byte(hex.EncodeToString(sum[:])), []byte(c.tokenHash)) != 1 {
			writeError(w, job.Errorf(job.CodeUnauthorized, "the children socket needs this task's AGENT_TASK_TOKEN as a bearer token"))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// own serves h only for a child of this socket's parent; any other id is
// answered as not found, so other tasks' ids are not disclosed.
func (c *children) own(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		st, err := c.api.status(r.PathValue("id"))
		if err != nil || st.ParentID != c.parent {
			writeError(w, job.Errorf(job.CodeJobNotFound, "no such child task").With("task_id", r.PathValue("id")))
			return
		}
		h(w, r)
	}
}

func (c *children) submit(w http.ResponseWriter, r *http.Request) {
	doc, err := readManifest(w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	id, err := c.api.s.SubmitChild(c.parent, doc)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"task_id": id, "accepted": true, "parent_id": c.parent})
}

func (c *children) list(w http.ResponseWriter, r *http.Request) {
	out := []TaskStatus{}
	for _, rec := range c.api.s.Children(c.parent) {
		if st, err := c.api.status(rec.TaskID); err == nil {
			out = append(out, st)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	writeJSON(w, http.StatusOK, map[string]any{"tasks": out, "total_count": len(out)})
}

// CleanStaleSockets removes children-socket directories left in $TMPDIR
// by a server that was killed: those whose socket no longer accepts a
// connection. Live sockets of other servers, and directories younger than
// a minute (a socket being set up right now), are left alone. It returns
// the directories removed.
func CleanStaleSockets() []string {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "agent-runner-children-*"))
	var removed []string
	for _, dir := range dirs {
		if fi, err := os.Stat(dir); err != nil || time.Since(fi.ModTime()) < time.Minute {
			continue
		}
		sock := filepath.Join(dir, ChildSocketName)
		if c, err := net.DialTimeout("unix", sock, time.Second); err == nil {
			c.Close()
			continue
		}
		if os.RemoveAll(dir) == nil {
			removed = append(removed, dir)
		}
	}
	return removed
}
