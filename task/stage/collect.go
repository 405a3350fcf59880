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

// Collect writes <id>.patch (git diff --binary against the staged commit,
// new files included) and <id>-untracked.txt to outbox/artifacts and
// returns them with checksums.
//
// The agent owned the inbox, .git included: its config could name an
// fsmonitor, a filter or a diff driver, and running git there as the
// runner would run those commands on the host. So git reads only the
// work tree's files, with the runner's base.git (saved at staging) as the
// repository and a throwaway index; the inbox's .git is never opened.
// Committed changes the agent made are part of the patch too.
func Collect(ctx context.Context, l Layout, t *manifest.Task) ([]Artifact, error) {
	tmp, err := os.MkdirTemp("", "agent-runner-collect-")
	if err != nil {
		return nil, job.Wrap(job.CodeRunIOFailed, err, "cannot create a scratch index")
	}
	defer os.RemoveAll(tmp)
	env := []string{"GIT_DIR=" + l.Base(), "GIT_WORK_TREE=" + l.Inbox(), "GIT_INDEX_FILE=" + filepath.Join(tmp, "index")}
	g := func(args ...string) ([]byte, error) { return gitEnv(ctx, l.Inbox(), env, args...) }
	if _, err := g("read-tree", "refs/heads/base"); err != nil {
		return nil, err
	}
	untracked, err := g("ls-files", "--others", "--exclude-standard", "-z")
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
		// Intent-to-add makes new files part of the diff.
		if _, err := g(append([]string{"add", "--intent-to-add", "--"}, files...)...); err != nil {
			return nil, err
		}
	}
	patch, err := g("diff", "--binary", "--no-ext-diff", "--no-textconv", "refs/heads/base")
	if err != nil {
		return nil, err
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
