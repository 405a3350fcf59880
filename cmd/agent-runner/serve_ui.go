package main

import (
	"context"

	"github.com/agent-runner/agent-runner/door/ui"
)

// mountUI mounts the web dashboard at /ui/ (GET / redirects there): pages
// embedded in the binary, served without a token; everything they show
// comes from the API's routes, behind its tokens (docs/ui.md).
func mountUI(ctx context.Context, d serveDeps) {
	ui.Mount(ctx, ui.Config{Mux: d.Mux, Auth: d.Auth, Store: d.Runner.Store()})
}
