package buildcache

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestTokenNamespace(t *testing.T) {
	for _, tt := range []struct{ name, want string }{
		{"", ""},
		{"alice", "token-alice"},
		{"CI.bot_1", "token-CI.bot_1"},
		{"../x", "token--" + strings.Repeat("?", 32)},
		{"-x", "token--" + strings.Repeat("?", 32)},
	} {
		got := TokenNamespace(tt.name)
		if strings.HasSuffix(tt.want, "?") {
			if !strings.HasPrefix(got, "token--") || len(got) != len(tt.want) {
				t.Errorf("TokenNamespace(%q) = %q, want token--<32 hex>", tt.name, got)
			}
		} else if got != tt.want {
			t.Errorf("TokenNamespace(%q) = %q, want %q", tt.name, got, tt.want)
		}
		if got != "" && !ValidNamespace(got) {
			t.Errorf("TokenNamespace(%q) = %q, not a valid namespace", tt.name, got)
		}
		if got == LocalNamespace || got == SharedNamespace {
			t.Errorf("TokenNamespace(%q) = %q, a namespace that is not a token's", tt.name, got)
		}
	}
	if TokenNamespace("../x") == TokenNamespace("-x") {
		t.Errorf("two names share the hashed namespace %q", TokenNamespace("-x"))
	}
}

func TestNamespaceFor(t *testing.T) {
	shared := []string{"npm"}
	for _, tt := range []struct{ name, want string }{
		{"npm", SharedNamespace},
		{"go-build", "token-alice"},
	} {
		if got := NamespaceFor("token-alice", shared, tt.name); got != tt.want {
			t.Errorf("NamespaceFor(token-alice, %v, %q) = %q, want %q", shared, tt.name, got, tt.want)
		}
	}
}

// TestTwoCallersNamingOneCache: two tokens naming go-build get two
// directories; what one plants the other never sees.
func TestTwoCallersNamingOneCache(t *testing.T) {
	c := open(t, Options{})
	alice, bob := TokenNamespace("alice"), TokenNamespace("bob")
	la, err := c.Acquire(alice, "go-build")
	if err != nil {
		t.Fatal(err)
	}
	write(t, la.Dir, "ab/forged-action", 1, 0)
	la.Release()
	lb, err := c.Acquire(bob, "go-build")
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Release()
	if la.Dir == lb.Dir {
		t.Fatalf("both callers got %s", la.Dir)
	}
	if got, want := lb.Dir, filepath.Join(c.Dir(), "token-bob", "go-build"); got != want {
		t.Errorf("bob's cache = %s, want %s", got, want)
	}
	if got := files(t, lb.Dir); len(got) != 0 {
		t.Errorf("bob's cache holds %v, want nothing of alice's", got)
	}
	if _, err := os.Stat(filepath.Join(la.Dir, "ab", "forged-action")); err != nil {
		t.Errorf("alice's own entry: %v", err)
	}
	if diff := cmp.Diff([]string(nil), files(t, lb.Dir)); diff != "" {
		t.Errorf("bob's cache (-want +got):\n%s", diff)
	}
}
