package e2bapi

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/session"
)

func TestSessionRequest(t *testing.T) {
	for _, tc := range []struct {
		body string
		want session.CreateRequest
		// code or unsupported, when the body is refused.
		code        job.Code
		unsupported bool
		// noInternet: the server gives sandboxes no internet.
		noInternet bool
	}{
		{body: `{"templateID":"base","timeout":60,"metadata":{"a":"b"}}`, want: session.CreateRequest{TimeoutS: 60, Metadata: map[string]string{"a": "b"}, Network: &session.Network{Mode: "disabled"}}},
		{body: `{}`, want: session.CreateRequest{Network: &session.Network{Mode: "disabled"}}},
		{body: `{"allow_internet_access":true}`, want: session.CreateRequest{Network: &session.Network{Mode: "host"}}},
		{body: `{"allow_internet_access":true}`, noInternet: true, code: job.CodeNetworkDenied},
		{body: `{"secure":false,"envVars":{},"autoPause":false}`, want: session.CreateRequest{Network: &session.Network{Mode: "disabled"}}},
		{body: `{"allow_internet_access":false}`, want: session.CreateRequest{Network: &session.Network{Mode: "disabled"}}},
		{body: `{"network":{"allowOut":["pypi.org"],"denyOut":["0.0.0.0/0"]}}`, want: session.CreateRequest{Network: &session.Network{Mode: "allowlist", AllowedHosts: []string{"pypi.org"}}}},
		{body: `{"network":{"allowOut":["pypi.org"]}}`, want: session.CreateRequest{Network: &session.Network{Mode: "allowlist", AllowedHosts: []string{"pypi.org"}}}},
		{body: `{"network":{"denyOut":["0.0.0.0/0"]}}`, want: session.CreateRequest{Network: &session.Network{Mode: "disabled"}}},
		{body: `{"autoPause":false}`, want: session.CreateRequest{Network: &session.Network{Mode: "disabled"}}},
		{body: `{"templateID":"python"}`, code: job.CodeJobNotFound},
		{body: `{"templateID":"python-warm"}`, want: session.CreateRequest{Template: "python-warm", Network: &session.Network{Mode: "disabled"}}},
		{body: `{"timeout":0}`, code: job.CodeInvalidRequest},
		{body: `{"envVars":{"A":"b"}}`, want: session.CreateRequest{Env: map[string]string{"A": "b"}, Network: &session.Network{Mode: "disabled"}}},
		{body: `{"autoPause":true}`, want: session.CreateRequest{OnTimeout: session.OnTimeoutPause, Network: &session.Network{Mode: "disabled"}}},
		{body: `{"autoPause":true,"autoPauseMemory":true,"autoResume":{"enabled":true}}`, want: session.CreateRequest{OnTimeout: session.OnTimeoutPause, AutoResume: true, Network: &session.Network{Mode: "disabled"}}},
		{body: `{"autoPause":true,"autoResume":{"enabled":false}}`, want: session.CreateRequest{OnTimeout: session.OnTimeoutPause, Network: &session.Network{Mode: "disabled"}}},
		{body: `{"autoPause":true,"autoPauseMemory":false}`, unsupported: true},
		{body: `{"mcp":{"x":{}}}`, unsupported: true},
		{body: `{"volumeMounts":[{"name":"v","path":"/data"}]}`, unsupported: true},
		{body: `{"network":{"denyOut":["10.0.0.0/8"]}}`, unsupported: true},
		{body: `{"network":{"rules":{}}}`, unsupported: true},
		{body: `{"network":{"allowPublicTraffic":false}}`, unsupported: true},
		{body: `{"network":{"allowOut":["a.com"]},"allow_internet_access":true}`, unsupported: true},
	} {
		var b createBody
		if err := json.Unmarshal([]byte(tc.body), &b); err != nil {
			t.Fatal(err)
		}
		internet := &session.Network{Mode: "host"}
		if tc.noInternet {
			internet = nil
		}
		got, err := sessionRequest(b, internet, func(name string) bool { return name == "python-warm" })
		var u *unsupported
		switch {
		case tc.unsupported:
			if !errors.As(err, &u) {
				t.Errorf("sessionRequest(%s) = %v, want not supported", tc.body, err)
			}
		case tc.code != "":
			if job.CodeOf(err) != tc.code {
				t.Errorf("sessionRequest(%s) = %v, want %s", tc.body, err, tc.code)
			}
		case err != nil:
			t.Errorf("sessionRequest(%s) = %v", tc.body, err)
		default:
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("sessionRequest(%s) (-want +got):\n%s", tc.body, diff)
			}
		}
	}
}

func TestWorkspacePath(t *testing.T) {
	d := New(Config{})
	for _, tc := range []struct{ in, want string }{
		{"", "."},
		{"a.txt", "a.txt"},
		{"./a/../b.txt", "b.txt"},
		{"/home/user", "."},
		{"/home/user/src/main.py", "src/main.py"},
		{"/workspace/x", "x"},
		{"/home/user/../user/y", "y"},
		{"../etc", "../etc"}, // the session service refuses it
	} {
		if got, err := d.workspacePath(tc.in); err != nil || got != tc.want {
			t.Errorf("workspacePath(%q) = %q, %v, want %q", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"/etc/passwd", "/home/userx/a", "/home/user/../../etc", "/"} {
		if got, err := d.workspacePath(in); job.CodeOf(err) != job.CodePathEscape {
			t.Errorf("workspacePath(%q) = %q, %v, want validation.path_escape", in, got, err)
		}
	}
}

func TestPaginate(t *testing.T) {
	all := []listedJSON{{SandboxID: "a"}, {SandboxID: "b"}, {SandboxID: "c"}}
	ids := func(l []listedJSON) (out []string) {
		for _, s := range l {
			out = append(out, s.SandboxID)
		}
		return out
	}
	for _, tc := range []struct {
		limit, token string
		want         []string
		next         string
	}{
		{"", "", []string{"a", "b", "c"}, ""},
		{"2", "", []string{"a", "b"}, "c"},
		{"2", "c", []string{"c"}, ""},
		{"5", "b", []string{"b", "c"}, ""},
	} {
		got, next, err := paginate(all, tc.limit, tc.token)
		if err != nil || !cmp.Equal(ids(got), tc.want) || next != tc.next {
			t.Errorf("paginate(limit %q, token %q) = %v, %q, %v; want %v, %q", tc.limit, tc.token, ids(got), next, err, tc.want, tc.next)
		}
	}
	for _, bad := range [][2]string{{"0", ""}, {"x", ""}, {"1", "zz"}} {
		if _, _, err := paginate(all, bad[0], bad[1]); job.CodeOf(err) != job.CodeInvalidRequest {
			t.Errorf("paginate(%q, %q) = %v, want validation.invalid_request", bad[0], bad[1], err)
		}
	}
}

func TestEndEvent(t *testing.T) {
	zero, three := 0, 3
	for _, tc := range []struct {
		info                 session.ProcessInfo
		code                 int32
		exited               bool
		status, errorMessage string
	}{
		{session.ProcessInfo{ExitCode: &zero}, 0, true, "exit status 0", ""},
		{session.ProcessInfo{ExitCode: &three}, 3, true, "exit status 3", "exit status 3"},
		{session.ProcessInfo{Error: job.Errorf(job.CodeRunSignaled, "killed")}, -1, false, "signal: killed", "signal: killed (killed)"},
	} {
		e := endEvent(tc.info)
		if e.GetExitCode() != tc.code || e.GetExited() != tc.exited || e.GetStatus() != tc.status || e.GetError() != tc.errorMessage {
			t.Errorf("endEvent(%+v) = %v, want %d %v %q %q", tc.info, e, tc.code, tc.exited, tc.status, tc.errorMessage)
		}
	}
}
