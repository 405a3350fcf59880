package launch

import (
	"encoding/json"
	"os"
	"path/filepath"

	"github.com/agent-runner/agent-runner/agent/audit"
)

// VerifyRun verifies a run directory's audit.jsonl (or an audit file
// given directly). For a run directory it also compares summary.json's
// audit_head_sha256 with the last line, which catches a removed or edited
// tail that the chain alone cannot.
func VerifyRun(path string) (audit.Report, error) {
	rep, err := audit.VerifyPath(path)
	if err != nil || !rep.OK {
		return rep, err
	}
	fi, err := os.Stat(path)
	if err != nil || !fi.IsDir() {
		return rep, nil
	}
	b, err := os.ReadFile(filepath.Join(path, "summary.json"))
	if err != nil {
		return rep, nil // a run cut before its summary: the chain result stands
	}
	var sum Summary
	if json.Unmarshal(b, &sum) != nil || sum.AuditHeadSHA256 == "" {
		return rep, nil
	}
	if sum.AuditHeadSHA256 != rep.HeadSHA256 {
		rep.OK = false
		rep.BrokenLine = rep.Lines
		rep.Problem = "last line does not match summary.json audit_head_sha256 (tail edited or cut)"
	}
	return rep, nil
}
