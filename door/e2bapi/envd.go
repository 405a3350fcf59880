package e2bapi

import (
	"net/http"

	"connectrpc.com/connect"

	"github.com/agent-runner/agent-runner/door/e2bapi/envd/filesystem/filesystemconnect"
	"github.com/agent-runner/agent-runner/door/e2bapi/envd/process/processconnect"
	"github.com/agent-runner/agent-runner/job"
)

// maxRPCBytes bounds one Connect request message (a process's input
// included), as the sessions API bounds a stdin body.
const maxRPCBytes = 1 << 20

// envdRoutes are the in-sandbox API's routes: envd's HTTP routes and its
// Connect-RPC services (Connect protocol, JSON or binary).
func (d *Door) envdRoutes() {
	m := d.envd
	m.HandleFunc("GET /health", d.health)
	m.HandleFunc("GET /files", d.readFile)
	m.HandleFunc("POST /files", d.writeFiles)
	procPath, procHandler := processconnect.NewProcessHandler(&processService{d: d}, connect.WithReadMaxBytes(maxRPCBytes), connect.WithCompressMinBytes(1<<10))
	m.Handle(procPath, procHandler)
	fsPath, fsHandler := filesystemconnect.NewFilesystemHandler(&filesystemService{d: d}, connect.WithReadMaxBytes(maxRPCBytes))
	m.Handle(fsPath, fsHandler)
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeHTTPError(w, notSupported("envd's "+r.Method+" "+r.URL.Path))
	})
}

// health is envd's liveness: 204 while the sandbox runs, 502 once it
// ended (the SDKs read that as "not running").
func (d *Door) health(w http.ResponseWriter, r *http.Request) {
	id, err := d.sandboxOf(r.Header)
	if err != nil {
		writeHTTPError(w, err)
		return
	}
	rec, err := d.cfg.Sessions.Get(id)
	switch {
	case err != nil:
		writeHTTPError(w, err)
	case !rec.State.Live():
		writeHTTPError(w, job.Errorf(job.CodeSessionNotRunning, "sandbox %s is %s", id, rec.State).With("state", string(rec.State)))
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

// basicUser is the user a request acts as: envd's Basic authorization
// ("user:"), or "" when it names none.
func basicUser(h http.Header) string {
	r := http.Request{Header: h}
	u, _, _ := r.BasicAuth()
	return u
}

// rpcSandbox authenticates a Connect request and checks its user.
func (d *Door) rpcSandbox(h http.Header) (string, error) {
	id, err := d.sandboxOf(h)
	if err != nil {
		return "", rpcError(err)
	}
	if err := checkUser(basicUser(h)); err != nil {
		return "", rpcError(err)
	}
	return id, nil
}
