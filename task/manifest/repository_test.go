package manifest

import (
	"testing"

	"github.com/agent-runner/agent-runner/job"
)

func TestRepositoryLocalPath(t *testing.T) {
	tests := []struct {
		url   string
		path  string
		local bool
		code  job.Code
	}{
		{"https://github.com/o/r.git", "", false, ""},
		{"HTTPS://github.com/o/r.git", "", false, ""},
		{"ssh://git@github.com/o/r.git", "", false, ""},
		{"git@github.com:o/r.git", "", false, ""},
		{"github.com:o/r", "", false, ""},
		{"git://example.org/r", "", false, ""},
		{"/srv/repos/r", "/srv/repos/r", true, ""},
		{"repos/r", "repos/r", true, ""},
		{"./a:b", "./a:b", true, ""},
		{"file:///srv/repos/r", "/srv/repos/r", true, ""},
		{"FILE:///etc", "/etc", true, ""},
		{"file://localhost/srv/r", "/srv/r", true, ""},
		{"file://host/srv/r", "", false, job.CodeInvalidRequest},
		{"file://relative", "", false, job.CodeInvalidRequest},
		{"file:///srv/%2e%2e/etc", "", false, job.CodeInvalidRequest},
		{"ext::sh -c touch% /tmp/pwned", "", false, job.CodeInvalidRequest},
		{"fd::3", "", false, job.CodeInvalidRequest},
		{"gopher://x/r", "", false, job.CodeInvalidRequest},
	}
	for _, tt := range tests {
		path, local, err := Repository{URL: tt.url}.LocalPath()
		if path != tt.path || local != tt.local || job.CodeOf(err) != tt.code {
			t.Errorf("LocalPath(%q) = %q, %v, %v; want %q, %v, code %q", tt.url, path, local, err, tt.path, tt.local, tt.code)
		}
	}
}
