// Package ui is agent-runner's web dashboard: plain ES modules and CSS
// embedded in the binary and served by `serve` at /ui/ (GET / redirects
// there), plus the one read route the pages need that the HTTP API does
// not offer: a job's request with its environment values withheld. A
// task's live stream is the task API's own route, read with fetch (which,
// unlike a browser's WebSocket, carries the bearer token) as Server-Sent
// Events. The pages are
// public; every datum they show comes from routes behind the API's tokens.
package ui

import (
	"embed"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"sort"
	"strings"
)

//go:embed static
var static embed.FS

// Prefix is where the pages are served.
const Prefix = "/ui/"

// Assets lists the URL paths of the embedded pages and files ("/ui/",
// "/ui/app.js", ...): the only paths of the dashboard served without a
// token.
func Assets() []string {
	out := []string{Prefix}
	fs.WalkDir(static, "static", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && p != "static/index.html" {
			out = append(out, Prefix+strings.TrimPrefix(p, "static/"))
		}
		return nil
	})
	sort.Strings(out)
	return out
}

// files serves the embedded assets: index.html at /ui/, every other file
// at /ui/<name> (the vendored terminal emulator at /ui/vendor/...),
// anything else 404. Nothing is cached by the browser
// across binaries (no-cache: it revalidates, and there is no ETag, so it
// refetches; the files are small).
func files() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(r.URL.Path, Prefix)
		if name == "" {
			name = "index.html"
		}
		if !fs.ValidPath(name) {
			http.NotFound(w, r)
			return
		}
		b, err := static.ReadFile("static/" + name)
		if err != nil {
			http.NotFound(w, r)
			return
		}
		ctype := mime.TypeByExtension(path.Ext(name))
		switch {
		case path.Base(name) == "LICENSE":
			ctype = "text/plain; charset=utf-8"
		case ctype == "":
			ctype = "application/octet-stream"
		}
		h := w.Header()
		h.Set("Content-Type", ctype)
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Content-Type-Options", "nosniff")
		// Everything the page loads is its own: no CDN, no inline script.
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data: blob:; style-src 'self'; frame-ancestors 'none'")
		h.Set("Referrer-Policy", "no-referrer")
		w.Write(b)
	})
}
