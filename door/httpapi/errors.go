package httpapi

import (
	"net/http"

	"github.com/agent-runner/agent-runner/door/httpreply"
)

// writeError and writeJSON answer through httpreply, the one mapping of
// job codes to statuses that every HTTP door shares.
func writeError(w http.ResponseWriter, err error) { httpreply.Error(w, err) }

func writeJSON(w http.ResponseWriter, status int, v any) { httpreply.JSON(w, status, v) }
