package main

import (
	"context"

	"github.com/agent-runner/agent-runner/ui"
)

// serve mounts the web dashboard at /ui/ (GET / redirects there): pages
// embedded in the binary, served without a token; everything they show
// comes from the API's routes, behind its tokens (docs/ui.md).
func init() {
	serveMounts = append(serveMounts, func(ctx context.Context, d serveDeps) error {
		ui.Mount(ctx, ui.Config{Mux: d.Mux, Auth: d.Auth, Store: d.Runner.Store()})
		return nil
	})
}
