package main

import (
	"github.com/agent-runner/agent-runner/door/ui"
)

// mountUI mounts the web dashboard at /ui/ (GET / redirects there): pages
// embedded in the binary, served without a token; everything they show
// comes from the API's routes, behind its tokens (docs/ui.md).
func mountUI(d serveDeps) {
	ui.Mount(ui.Config{Mux: d.Mux, Auth: d.Auth, Store: d.Runner.Store()})
}
