package sessionapi

import (
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"

	"github.com/agent-runner/agent-runner/door/httpreply"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/session"
)

// The ports route proxies HTTP, and WebSocket upgrades, to a server
// listening on 127.0.0.1:PORT inside a sandbox: /v1/sandboxes/{id}/ports/
// {port}/{path...} with the query is sent as /{path...} with the query,
// over a connection the session service dials into the sandbox
// (Service.DialPort), never over a network the sandbox has. The caller's
// token (Authorization) and the hop-by-hop headers are not forwarded;
// X-Forwarded-For, -Host and -Proto say who asked, and
// X-Forwarded-Prefix is the route's prefix, so a server can build its
// own links. Every answer of the sandbox's server carries
// Content-Security-Policy: sandbox (without allow-same-origin; added to
// any policy of the server's own, all of which a browser enforces): a page
// it serves runs in an opaque origin, never with the runner's, so its
// scripts cannot call the runner's API as the browser that opened it.

// proxyMethods are the methods the ports route takes: every one a
// server is commonly asked with (HEAD goes with GET).
var proxyMethods = []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions}

// portsPath is the route's path: the sandbox, the port, then the path
// forwarded.
const portsPath = "/v1/sandboxes/{id}/ports/{port}/{path...}"

// proxyCSP is the Content-Security-Policy of every proxied answer.
const proxyCSP = "sandbox allow-scripts allow-forms allow-popups allow-modals allow-downloads"

// maxProxiedHeaderBytes bounds the headers of a sandbox server's answer.
const maxProxiedHeaderBytes = 1 << 20

// portRoutes are the ports route's patterns, one per method.
func portRoutes() []route {
	out := make([]route, len(proxyMethods))
	for i, m := range proxyMethods {
		out[i] = route{pattern: m + " " + portsPath, h: servePort, anyBody: true}
	}
	return out
}

// servePort dials the port first, so that a bad port (422), an unknown
// (404) or not running (409) sandbox and a port nothing listens on (502
// session.port_unreachable) are answered as every route's errors are,
// then proxies the request over that connection.
func servePort(s *session.Service, w http.ResponseWriter, r *http.Request) {
	id, rawPort := r.PathValue("id"), r.PathValue("port")
	port, err := strconv.Atoi(rawPort)
	if err != nil || strconv.Itoa(port) != rawPort {
		httpreply.Error(w, job.Errorf(job.CodeInvalidRequest, "port %q is not a TCP port (1-65535)", rawPort).With("field", "port"))
		return
	}
	conn, err := s.DialPort(r.Context(), id, port)
	if err != nil {
		httpreply.Error(w, err)
		return
	}
	prefix := "/v1/sandboxes/" + id + "/ports/" + rawPort
	first := make(chan net.Conn, 1)
	first <- conn
	tr := &http.Transport{
		// The first connection is the one dialled above; the transport
		// opens another only when that one could not be used.
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			select {
			case c := <-first:
				return c, nil
			default:
				return s.DialPort(ctx, id, port)
			}
		},
		DisableKeepAlives:      true,
		DisableCompression:     true,
		MaxResponseHeaderBytes: maxProxiedHeaderBytes,
	}
	defer func() {
		select {
		case c := <-first:
			c.Close()
		default:
		}
		tr.CloseIdleConnections()
	}()
	p := &httputil.ReverseProxy{
		Rewrite:        func(pr *httputil.ProxyRequest) { rewrite(pr, prefix, port) },
		Transport:      tr,
		FlushInterval:  -1,
		ModifyResponse: func(resp *http.Response) error { resp.Header.Add("Content-Security-Policy", proxyCSP); return nil },
		ErrorHandler:   proxyError,
		ErrorLog:       log.New(io.Discard, "", 0),
	}
	p.ServeHTTP(w, r)
}

// rewrite makes the request the sandbox's server gets: the path after
// prefix, the query as it came, Host 127.0.0.1:port, no Authorization,
// X-Forwarded-* set (ReverseProxy already dropped the hop-by-hop
// headers and any X-Forwarded-* the caller sent).
func rewrite(pr *httputil.ProxyRequest, prefix string, port int) {
	host := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	// The segments after /v1/sandboxes/{id}/ports/{port}, as the mux
	// matched them (escaped).
	rest := "/"
	if segs := strings.SplitN(pr.In.URL.EscapedPath(), "/", 7); len(segs) == 7 {
		rest += segs[6]
	}
	u, err := url.Parse(rest)
	if err != nil {
		u = &url.URL{Path: "/"}
	}
	pr.Out.URL = &url.URL{Scheme: "http", Host: host, Path: u.Path, RawPath: u.RawPath, RawQuery: pr.In.URL.RawQuery}
	pr.Out.Host = host
	pr.Out.Header.Del("Authorization")
	pr.SetXForwarded()
	pr.Out.Header.Set("X-Forwarded-Prefix", prefix)
}

// proxyError answers a request the sandbox's server did not answer (it
// closed the connection, or sent what is not HTTP): 502
// session.port_unreachable. A caller that went away is answered nothing.
func proxyError(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		return
	}
	httpreply.Error(w, job.Wrap(job.CodeSessionPortUnreachable, err, "the server in the sandbox did not answer").
		With("port", r.PathValue("port")))
}
