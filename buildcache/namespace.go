package buildcache

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"slices"
)

// Namespaces that are not a token's.
const (
	// LocalNamespace holds the caches of this host's own processes: the
	// CLI (run, replay), library callers, and a loopback serve without a
	// token file, where every caller is the host's user.
	LocalNamespace = "local"
	// SharedNamespace holds the caches the operator shares across every
	// caller (serve --shared-cache): any caller can write what the others
	// will trust.
	SharedNamespace = "shared"
)

var validNamespace = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// ValidNamespace reports whether ns may name a namespace: one directory
// name, no dot first (the host's own directories start with one).
func ValidNamespace(ns string) bool { return validNamespace.MatchString(ns) }

var plainTokenName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// TokenNamespace is the namespace of the callers holding a token named
// name (the token file's third field): "token-<name>", or for a name that
// cannot be a directory name "token--<hash>" (a plain name never starts
// with "-", so the two never meet). Tokens sharing a name share caches.
// An unnamed token has none: "".
func TokenNamespace(name string) string {
	switch {
	case name == "":
		return ""
	case plainTokenName.MatchString(name):
		return "token-" + name
	}
	sum := sha256.Sum256([]byte(name))
	return "token--" + hex.EncodeToString(sum[:16])
}

// NamespaceFor is where cache name of a caller in namespace caller lives:
// SharedNamespace when the operator shares name, caller's otherwise.
func NamespaceFor(caller string, shared []string, name string) string {
	if slices.Contains(shared, name) {
		return SharedNamespace
	}
	return caller
}
