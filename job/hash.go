package job

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"
)

// SHA256Hex is the lowercase hex SHA-256 of b.
func SHA256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// RequestSHA256 hashes the normalized request without its job_id, so the same
// request submitted twice hashes the same.
func RequestSHA256(r Request) string {
	r.JobID = ""
	b, _ := json.Marshal(r)
	return SHA256Hex(b)
}

// ResultSHA256 hashes the reproducible part of a result: status, exit code,
// output and artifact hashes, the workspace and request hashes and the error
// code. Job id, timestamps, durations and usage are left out on purpose.
func ResultSHA256(r Result) string {
	type artifactKey struct {
		Path   string `json:"path"`
		SHA256 string `json:"sha256"`
		Size   int64  `json:"size_bytes"`
	}
	key := struct {
		Status    Status        `json:"status"`
		ExitCode  *int          `json:"exit_code"`
		Stdout    string        `json:"stdout_sha256"`
		Stderr    string        `json:"stderr_sha256"`
		Artifacts []artifactKey `json:"artifacts"`
		Request   string        `json:"request_sha256"`
		Workspace string        `json:"workspace_snapshot_sha256"`
		ErrorCode Code          `json:"error_code,omitempty"`
	}{
		Status: r.Status, ExitCode: r.ExitCode, Stdout: r.Stdout.SHA256, Stderr: r.Stderr.SHA256,
		Request: r.Replay.RequestSHA256, Workspace: r.Replay.WorkspaceSnapshotSHA256,
		Artifacts: []artifactKey{},
	}
	if r.Error != nil {
		key.ErrorCode = r.Error.Code
	}
	for _, a := range r.Artifacts {
		key.Artifacts = append(key.Artifacts, artifactKey{a.Path, a.SHA256, a.SizeBytes})
	}
	b, _ := json.Marshal(key)
	return SHA256Hex(b)
}

// PolicyVersion is "sha256:" + the hash of the canonical policy JSON.
// Canonical means that lists whose order does not change the decision are
// sorted and deduplicated (allowed_env, artifact globs), and allowed
// commands are stably sorted by basename (the first rule for a basename
// still wins), so the same policy written in another order has the same
// version.
func PolicyVersion(p Policy) string {
	p.AllowedEnv = sortedSet(p.AllowedEnv)
	p.ArtifactGlobs = sortedSet(p.ArtifactGlobs)
	p.ArtifactDenyGlobs = sortedSet(p.ArtifactDenyGlobs)
	rules := slices.Clone(p.AllowedCommands)
	slices.SortStableFunc(rules, func(a, b CommandRule) int { return strings.Compare(a.Basename, b.Basename) })
	p.AllowedCommands = slices.Compact(rules)
	b, _ := json.Marshal(p)
	return "sha256:" + SHA256Hex(b)
}

func sortedSet(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	s = slices.Clone(s)
	slices.Sort(s)
	return slices.Compact(s)
}

// MarshalIndent encodes v as indented JSON without HTML escaping (so "<"
// and ">" in command output stay readable), ending in a newline.
func MarshalIndent(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
