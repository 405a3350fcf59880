package manifest

import (
	"net/url"
	"strings"

	"github.com/agent-runner/agent-runner/egress"
	"github.com/agent-runner/agent-runner/job"
)

// remoteSchemes are the URL schemes git fetches over the network; the
// runner's workspace roots do not apply to them.
var remoteSchemes = map[string]bool{"http": true, "https": true, "ssh": true, "git": true, "git+ssh": true, "ssh+git": true, "ftp": true, "ftps": true}

// LocalPath reports the host path git would read repository.url from: a
// file:// URL's path, or a path (absolute, or relative to the runner's
// working directory), as git tells them from scp-like "host:path" (a local
// path has no colon, or a slash before its first colon). Remote URLs
// (https, ssh, git, scp-like) return local false. A remote-helper address
// ("transport::address") or an unknown scheme is refused: git would hand
// it to a helper program, which could read anything.
func (r Repository) LocalPath() (path string, local bool, err error) {
	u := r.URL
	refuse := func(why string) error {
		return job.Errorf(job.CodeInvalidRequest, "repository.url %q: %s", u, why).With("field", "repository.url")
	}
	if strings.Contains(u, "::") {
		return "", false, refuse("remote-helper addresses (transport::address) are not supported")
	}
	if scheme, rest, ok := strings.Cut(u, "://"); ok && !strings.Contains(scheme, "/") {
		scheme = strings.ToLower(scheme)
		switch {
		case remoteSchemes[scheme]:
			return "", false, nil
		case scheme != "file":
			return "", false, refuse("unknown URL scheme " + scheme)
		}
		// file://[localhost]/path; git does not decode %XX here, so a
		// path carrying one (or a query) is refused rather than guessed.
		if strings.ContainsAny(rest, "%?#") {
			return "", false, refuse("a file:// URL with %, ? or # is not supported")
		}
		p, ok := strings.CutPrefix(rest, "localhost")
		if !ok {
			p = rest
		}
		if !strings.HasPrefix(p, "/") {
			return "", false, refuse("a file:// URL needs an absolute path (file:///path)")
		}
		return p, true, nil
	}
	colon, slash := strings.IndexByte(u, ':'), strings.IndexByte(u, '/')
	if colon >= 0 && (slash < 0 || colon < slash) {
		return "", false, nil // scp-like [user@]host:path
	}
	return u, true, nil
}

// CloneRule is the one host the clone of r, when remote, may reach
// through the egress gateway (an http or https URL's host and port), and
// whether r is remote. A local r has none; a remote one that is not
// http or https is policy.network_denied (the gateway speaks HTTP only).
func (r Repository) CloneRule() (egress.Rule, bool, error) {
	if _, local, err := r.LocalPath(); err != nil || local {
		return egress.Rule{}, false, err
	}
	refuse := func(why string) error {
		return job.Errorf(job.CodeNetworkDenied, "repository.url %q: %s", r.URL, why).With("field", "repository.url")
	}
	u, err := url.Parse(r.URL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Hostname() == "" {
		return egress.Rule{}, true, refuse("a remote repository is cloned through the egress gateway, which speaks HTTP and HTTPS only")
	}
	host := strings.ToLower(u.Hostname())
	port := u.Port()
	if port == "" {
		port = map[string]string{"https": "443", "http": "80"}[u.Scheme]
	}
	rule, err := egress.ParseRule(host + ":" + port)
	if err != nil {
		return egress.Rule{}, true, refuse(err.Error())
	}
	return rule, true, nil
}
