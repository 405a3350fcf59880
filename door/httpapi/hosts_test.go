package httpapi

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestBindHost(t *testing.T) {
	tests := []struct{ addr, want string }{
		{"127.0.0.1:3000", "127.0.0.1"},
		{"10.1.2.3:3000", "10.1.2.3"},
		{"runner.internal:3000", "runner.internal"},
		{"[fd00::1]:3000", "fd00::1"},
		{":3000", ""},
		{"0.0.0.0:3000", ""},
		{"[::]:3000", ""},
		{"nonsense", ""},
	}
	for _, tt := range tests {
		if got := BindHost(tt.addr); got != tt.want {
			t.Errorf("BindHost(%q): got %q, want %q", tt.addr, got, tt.want)
		}
	}
}

// TestServesHost: loopback names with any port, the listen address's
// host unless a wildcard, and allowed hosts (a port when one is named).
func TestServesHost(t *testing.T) {
	tests := []struct {
		listen  string
		allowed []string
		host    string
		want    bool
	}{
		{"127.0.0.1:3000", nil, "127.0.0.1:3000", true},
		{"127.0.0.1:3000", nil, "localhost", true},
		{"127.0.0.1:3000", nil, "[::1]:80", true},
		{"127.0.0.1:3000", nil, "[::1]", true},
		{"127.0.0.1:3000", nil, "", false},
		{"127.0.0.1:3000", nil, "attacker.example:3000", false},
		{"10.1.2.3:3000", nil, "10.1.2.3:3000", true},
		{"0.0.0.0:3000", nil, "0.0.0.0:3000", false},
		{"0.0.0.0:3000", nil, "10.1.2.3:3000", false},
		{"0.0.0.0:3000", []string{"10.1.2.3"}, "10.1.2.3:3000", true},
		{"0.0.0.0:3000", []string{"Runner.Example."}, "runner.example", true},
		{"0.0.0.0:3000", []string{"runner.example:443"}, "runner.example:443", true},
		{"0.0.0.0:3000", []string{"runner.example:443"}, "runner.example:3000", false},
		{"0.0.0.0:3000", []string{"[fd00::1]"}, "[fd00::1]:3000", true},
	}
	for _, tt := range tests {
		p := newHostPolicy(tt.listen, tt.allowed)
		if got := p.servesHost(tt.host); got != tt.want {
			t.Errorf("listen %q, allowed %q, Host %q: got %v, want %v", tt.listen, tt.allowed, tt.host, got, tt.want)
		}
	}
}

func TestParseHostPort(t *testing.T) {
	tests := []struct {
		in   string
		want hostPort
	}{
		{"Example.COM:80", hostPort{"example.com", "80"}},
		{"example.com.", hostPort{"example.com", ""}},
		{"[::1]:3000", hostPort{"::1", "3000"}},
		{"[::1]", hostPort{"::1", ""}},
		{"", hostPort{}},
	}
	for _, tt := range tests {
		if got := parseHostPort(tt.in); !cmp.Equal(got, tt.want, cmp.AllowUnexported(hostPort{})) {
			t.Errorf("parseHostPort(%q): got %+v, want %+v", tt.in, got, tt.want)
		}
	}
}
