package image

import (
	"regexp"
	"strings"

	"github.com/agent-runner/agent-runner/job"
)

// A reference names an image in the store: a name:tag ("debian:12",
// "registry.example/team/tool:v1"; a name without a tag means ":latest")
// or a manifest digest ("sha256:" and 64 hex digits).

var (
	digestRe = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	// nameRe is a repository path: lowercase components separated by
	// "/", an optional registry host with a port first.
	nameRe = regexp.MustCompile(`^([a-zA-Z0-9.-]+(:[0-9]+)?/)?[a-z0-9]+([._-][a-z0-9]+)*(/[a-z0-9]+([._-][a-z0-9]+)*)*$`)
	tagRe  = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$`)
)

// IsDigest reports whether ref is a sha256 digest.
func IsDigest(ref string) bool { return digestRe.MatchString(ref) }

// NormalizeTag returns ref as the store records tags: name:tag, with
// ":latest" added to a bare name. Anything else (a digest, a name@digest,
// an empty or malformed name) is validation.invalid_request.
func NormalizeTag(ref string) (string, error) {
	name, tag := ref, "latest"
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		name, tag = ref[:i], ref[i+1:]
	}
	if len(ref) > 255 || !nameRe.MatchString(name) || !tagRe.MatchString(tag) {
		return "", job.Errorf(job.CodeInvalidRequest, "%q is not an image name:tag", ref).With("field", "ref")
	}
	return name + ":" + tag, nil
}

// checkRef validates a reference naming a stored image and returns it
// normalized.
func checkRef(ref string) (string, error) {
	if IsDigest(ref) {
		return ref, nil
	}
	if strings.HasPrefix(ref, "sha256:") {
		return "", job.Errorf(job.CodeInvalidRequest, "%q is not a sha256 digest (sha256: and 64 lowercase hex digits)", ref).With("field", "ref")
	}
	return NormalizeTag(ref)
}
