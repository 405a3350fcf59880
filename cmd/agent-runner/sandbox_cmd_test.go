package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSandboxRef(t *testing.T) {
	for _, tc := range []struct {
		arg, id, path string
		ok            bool
	}{
		{"sbx_1:src/a.txt", "sbx_1", "src/a.txt", true},
		{"demo:a:b", "demo", "a:b", true},
		{"local.txt", "", "", false},
		{"./a:b", "", "", false},
		{"/abs/a:b", "", "", false},
		{"-", "", "", false},
		{":x", "", "", false},
	} {
		id, path, ok := sandboxRef(tc.arg)
		if id != tc.id || path != tc.path || ok != tc.ok {
			t.Errorf("sandboxRef(%q) = %q, %q, %v, want %q, %q, %v", tc.arg, id, path, ok, tc.id, tc.path, tc.ok)
		}
	}
}

func TestSandboxKeyValues(t *testing.T) {
	got, err := keyValues("--metadata", []string{"owner=me", "team=a=b"})
	if diff := cmp.Diff(map[string]string{"owner": "me", "team": "a=b"}, got); diff != "" || err != nil {
		t.Errorf("keyValues (-want +got):\n%s (err %v)", diff, err)
	}
	for _, bad := range []string{"novalue", "=v"} {
		if _, err := keyValues("--metadata", []string{bad}); err == nil {
			t.Errorf("keyValues(%q) = nil error, want a usage error", bad)
		}
	}
}
