package secretfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/job"
)

func TestParse(t *testing.T) {
	f, err := Parse([]byte("secrets:\n  API_KEY: {env: TEST_API_KEY, hosts: [api.example.com, \"*.example.org:8443\"]}\n  GH: {file: /run/gh}\n"), "s.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := f.Names(), []string{"API_KEY", "GH"}; !cmp.Equal(got, want) {
		t.Errorf("Names() = %q, want %q", got, want)
	}
	if got, ok := f.Lookup("GH"); !ok || !cmp.Equal(got, Entry{Source: SourceFile, Key: "/run/gh"}) {
		t.Errorf("Lookup(GH) = %+v, %v", got, ok)
	}
	got, _ := f.Lookup("API_KEY")
	var hosts []string
	for _, h := range got.Hosts {
		hosts = append(hosts, h.String())
	}
	if want := []string{"api.example.com", "*.example.org:8443"}; got.Source != SourceEnv || !cmp.Equal(hosts, want) {
		t.Errorf("Lookup(API_KEY) = %+v hosts %q, want env with hosts %q", got, hosts, want)
	}
	if empty, err := Parse(nil, "empty.yaml"); err != nil || len(empty.Names()) != 0 {
		t.Errorf("an empty file = %v, %v; want no secrets", empty.Names(), err)
	}
}

func TestParseRefusals(t *testing.T) {
	tests := []struct{ name, doc, want string }{
		{"hosts not a list", "secrets:\n  K: {env: K, hosts: api.example.com}\n", "non-empty list"},
		{"hosts empty", "secrets:\n  K: {env: K, hosts: []}\n", "non-empty list"},
		{"hosts with an IP", "secrets:\n  K: {env: K, hosts: [10.0.0.1]}\n", "hosts:"},
		{"unknown key", "secrets:\n  K: {env: K, vault: x}\n", `unknown key "vault"`},
		{"both sources", "secrets:\n  K: {env: K, file: /k}\n", "not both"},
		{"no source", "secrets:\n  K: {}\n", "needs env or file"},
		{"relative file", "secrets:\n  K: {file: k.txt}\n", "absolute path"},
		{"bad name", "secrets:\n  \"A=B\": {env: K}\n", "variable name"},
		{"bad variable", "secrets:\n  K: {env: \"A B\"}\n", "not a variable name"},
		{"list value", "secrets:\n  K: {env: [a]}\n", "non-empty string"},
		{"unknown top-level key", "secret:\n  K: {env: K}\n", "not a secrets file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.doc), "s.yaml")
			if job.CodeOf(err) != job.CodeInvalidRequest || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "s.yaml") {
				t.Errorf("Parse(%q) = %v, want invalid_request naming s.yaml and %q", tt.doc, err, tt.want)
			}
		})
	}
}

func TestValue(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "gh"), []byte("gh-value\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "flag"), []byte("true\n"), 0o600)
	f, err := Parse([]byte("secrets:\n  API_KEY: {env: TEST_API_KEY}\n  GH: {file: "+filepath.Join(dir, "gh")+"}\n  MISSING: {file: /no/such/file}\n  UNSET: {env: UNSET_VAR}\n"+
		"  SHORT: {env: SHORT_VAR}\n  FLAG: {file: "+filepath.Join(dir, "flag")+"}\n"), "s.yaml")
	if err != nil {
		t.Fatal(err)
	}
	env := func(k string) string {
		return map[string]string{"TEST_API_KEY": "env-value", "SHORT_VAR": "1234567"}[k]
	}
	tests := []struct {
		name, want string
		code       job.Code
	}{
		{"API_KEY", "env-value", ""},
		{"GH", "gh-value", ""},
		{"MISSING", "", job.CodeInvalidRequest},
		{"UNSET", "", job.CodeInvalidRequest},
		{"HOME", "", job.CodeForbidden},
		{"SHORT", "", job.CodeInvalidRequest},
		{"FLAG", "", job.CodeInvalidRequest},
	}
	for _, tt := range tests {
		got, err := f.Value(tt.name, env)
		if got != tt.want || job.CodeOf(err) != tt.code {
			t.Errorf("Value(%q) = %q, %v; want %q, code %q", tt.name, got, err, tt.want, tt.code)
		}
	}
}

// TestValueRefusesShortValues: a value shorter than MinValueBytes would be
// redacted from ordinary output everywhere (a secret "1" corrupted every
// stream-json line), so it is refused with ErrTooShort, naming the secret
// and never the value.
func TestValueRefusesShortValues(t *testing.T) {
	f, err := Parse([]byte("secrets:\n  DEBUG_SWITCH: {env: V}\n"), "s.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"1", "true", "1234567"} {
		_, err := f.Value("DEBUG_SWITCH", func(string) string { return v })
		if !errors.Is(err, ErrTooShort) || !strings.Contains(err.Error(), "DEBUG_SWITCH") || strings.Contains(job.AsError(err).Message, v) {
			t.Errorf("Value(%q) = %v, want ErrTooShort naming DEBUG_SWITCH", v, err)
		}
	}
	if got, err := f.Value("DEBUG_SWITCH", func(string) string { return "12345678" }); err != nil || got != "12345678" {
		t.Errorf("Value(8 bytes) = %q, %v", got, err)
	}
}
