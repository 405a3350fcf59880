package lifecycle

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	"github.com/agent-runner/agent-runner/safecopy"
	"github.com/agent-runner/agent-runner/task/stage"
	"github.com/agent-runner/agent-runner/task/state"
)

// Child is one child task as the parent's metadata.json records it.
type Child struct {
	TaskID   string      `json:"task_id"`
	State    state.State `json:"state"`
	ExitCode *int        `json:"exit_code,omitempty"`
}

// childPoll is how often a waiting parent looks at its children.
const childPoll = 200 * time.Millisecond

// waitForChildren blocks (in completing) until every child is terminal.
func waitForChildren(ctx context.Context, m *state.Machine, log *slog.Logger, id string, list func(string) []state.Record) error {
	noted := false
	for {
		active := 0
		for _, c := range list(id) {
			if !c.State.Terminal() {
				active++
			}
		}
		if active == 0 {
			return nil
		}
		if !noted {
			note(m, log, "waiting_for_children", strconv.Itoa(active)+" children still active")
			noted = true
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(childPoll):
		}
	}
}

// childSummaries reads each child's final state and exit code.
func childSummaries(storeRoot string, recs []state.Record) []Child {
	out := make([]Child, 0, len(recs))
	for _, r := range recs {
		c := Child{TaskID: r.TaskID, State: r.State}
		if md, ok := ReadMetadata(filepath.Join(storeRoot, r.TaskID)); ok {
			c.ExitCode = md.ExitCode
		}
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].TaskID < out[j].TaskID })
	return out
}

// ReadMetadata reads a task directory's outbox/artifacts/metadata.json;
// false until the task has finished.
func ReadMetadata(dir string) (Metadata, bool) {
	var md Metadata
	b, err := os.ReadFile(filepath.Join(dir, "outbox", "artifacts", "metadata.json"))
	if err != nil || json.Unmarshal(b, &md) != nil {
		return Metadata{}, false
	}
	return md, true
}

// aggregate copies every finished child's artifacts (and its
// metadata.json) into outbox/artifacts/children/<child_id>/, with
// checksums, reading only the names the child's metadata lists, through
// safecopy within the default artifact caps. It returns what it copied
// and, as collectPatterns does, what it skipped and why. A child without
// metadata.json (one that never ran) has nothing to aggregate.
func aggregate(l stage.Layout, storeRoot string, children []Child) ([]stage.Artifact, []string) {
	var out []stage.Artifact
	var skipped []string
	caps := artifactCaps{file: DefaultMaxArtifactFileBytes, total: DefaultMaxArtifactBytes}
	budget := &safecopy.Budget{MaxBytes: caps.total}
	for _, c := range children {
		if !c.State.Terminal() {
			continue
		}
		md, ok := ReadMetadata(filepath.Join(storeRoot, c.TaskID))
		if !ok {
			continue
		}
		prefix := "children/" + c.TaskID + "/"
		root, err := safecopy.OpenRoot(filepath.Join(storeRoot, c.TaskID, "outbox", "artifacts"))
		if err != nil {
			skipped = append(skipped, prefix+": "+err.Error())
			continue
		}
		dst := filepath.Join(l.Artifacts(), "children", c.TaskID)
		for _, name := range append([]string{"metadata.json"}, artifactNames(md)...) {
			a, err := copyArtifactAs(context.Background(), root, name, dst, prefix, caps.file, budget)
			if err != nil {
				skipped = append(skipped, skipReason(prefix+name, err, caps))
				continue
			}
			out = append(out, a)
		}
		root.Close() // read only
	}
	return out, skipped
}

func artifactNames(md Metadata) []string {
	names := make([]string, 0, len(md.Artifacts))
	for _, a := range md.Artifacts {
		names = append(names, a.Name)
	}
	return names
}
