package job

// Status is the lifecycle state of a job. Queued and running are transient;
// every other status is terminal.
type Status string

// The seed statuses (seed 002), in the order a job can move through them.
const (
	StatusQueued             Status = "queued"
	StatusRunning            Status = "running"
	StatusCompleted          Status = "completed"
	StatusFailed             Status = "failed"
	StatusTimedOut           Status = "timed_out"
	StatusPolicyDenied       Status = "policy_denied"
	StatusSetupFailed        Status = "setup_failed"
	StatusBackendUnavailable Status = "backend_unavailable"
	StatusCanceled           Status = "canceled"
)

// Statuses lists every status, transient first.
var Statuses = []Status{
	StatusQueued, StatusRunning, StatusCompleted, StatusFailed, StatusTimedOut,
	StatusPolicyDenied, StatusSetupFailed, StatusBackendUnavailable, StatusCanceled,
}

// Terminal reports whether s is a final status.
func (s Status) Terminal() bool {
	switch s {
	case StatusCompleted, StatusFailed, StatusTimedOut, StatusPolicyDenied,
		StatusSetupFailed, StatusBackendUnavailable, StatusCanceled:
		return true
	}
	return false
}

// Valid reports whether s is one of the known statuses.
func (s Status) Valid() bool {
	for _, v := range Statuses {
		if s == v {
			return true
		}
	}
	return false
}

// StatusFor maps a terminal error code to the status a result carries.
func StatusFor(c Code) Status {
	switch c.Class() {
	case "policy":
		return StatusPolicyDenied
	case "validation":
		return StatusPolicyDenied
	case "backend":
		if c == CodeBackendSetupFailed {
			return StatusSetupFailed
		}
		return StatusBackendUnavailable
	}
	switch c {
	case CodeRunTimedOut:
		return StatusTimedOut
	case CodeRunCanceled:
		return StatusCanceled
	case CodeRunSpawnFailed, CodeSnapshotFailed:
		return StatusSetupFailed
	}
	return StatusFailed
}
