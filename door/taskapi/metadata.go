package taskapi

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"os"
	"path/filepath"

	"github.com/agent-runner/agent-runner/job"
)

// metadataFile is the task record seed 004 lists in outbox/artifacts.
const metadataFile = "metadata.json"

// serveMetadata answers a finished task's metadata.json with its SHA-256.
func (a *api) serveMetadata(w http.ResponseWriter, id string) {
	b, err := os.ReadFile(filepath.Join(a.s.Dir(id), "outbox", "artifacts", metadataFile))
	if err != nil {
		writeError(w, job.Wrap(job.CodeRunIOFailed, err, "cannot read the task's metadata.json"))
		return
	}
	sum := sha256.Sum256(b)
	w.Header().Set("X-Content-SHA256", hex.EncodeToString(sum[:]))
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}
