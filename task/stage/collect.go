package stage

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/task/manifest"
)

// Artifact is one collected file with its checksum.
type Artifact struct {
	Name      string `json:"name"`
	SizeBytes int64  `json:"size_bytes"`
	SHA256    string `json:"sha256"`
}

// Collect writes <id>.patch (git diff --binary HEAD, new files included
// via intent-to-add) and <id>-untracked.txt to outbox/artifacts and returns
// them with checksums.
func Collect(ctx context.Context, l Layout, t *manifest.Task) ([]Artifact, error) {
	repo := l.Inbox()
	untracked, err := git(ctx, repo, "ls-files", "--others", "--exclude-standard", "-z")
	if err != nil {
		return nil, err
	}
	var files []string
	for _, f := range strings.Split(string(untracked), "\x00") {
		if f != "" {
			files = append(files, f)
		}
	}
	if len(files) > 0 {
		// Intent-to-add makes new files part of the diff without staging content.
		if _, err := git(ctx, repo, append([]string{"add", "--intent-to-add", "--"}, files...)...); err != nil {
			return nil, err
		}
	}
	patch, err := git(ctx, repo, "diff", "--binary", "HEAD")
	if err != nil {
		return nil, err
	}
	if len(files) > 0 {
		_, _ = git(ctx, repo, append([]string{"reset", "--quiet", "--"}, files...)...)
	}
	outs := map[string][]byte{
		t.Metadata.ID + ".patch":         patch,
		t.Metadata.ID + "-untracked.txt": []byte(strings.Join(files, "\n") + newlineIf(len(files) > 0)),
	}
	var arts []Artifact
	for _, name := range []string{t.Metadata.ID + ".patch", t.Metadata.ID + "-untracked.txt"} {
		b := outs[name]
		if err := os.WriteFile(filepath.Join(l.Artifacts(), name), b, 0o644); err != nil {
			return nil, job.Wrap(job.CodeArtifactFailed, err, "cannot write "+name)
		}
		sum := sha256.Sum256(b)
		arts = append(arts, Artifact{Name: name, SizeBytes: int64(len(b)), SHA256: hex.EncodeToString(sum[:])})
	}
	return arts, nil
}

func newlineIf(b bool) string {
	if b {
		return "\n"
	}
	return ""
}
