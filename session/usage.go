package session

import "time"

// Usage is what a live sandbox's processes use together, as its backend
// reads it (backend.UsageSampler; on linux_sandbox its cgroup): CPU time
// since it was created, memory now and at its peak, processes now (its
// init among them). A paused sandbox's CPU time does not advance.
type Usage struct {
	CPUTimeMS       int64     `json:"cpu_time_ms"`
	MemoryBytes     int64     `json:"memory_bytes"`
	PeakMemoryBytes int64     `json:"peak_memory_bytes"`
	Processes       int64     `json:"processes"`
	SampledAt       time.Time `json:"sampled_at"`
}

// usage reads h's usage now, or nil where its backend cannot. h.sb
// never changes, so h's lock is not needed.
func (s *Service) usage(h *handle) *Usage {
	u, ok := h.sb.Usage()
	if !ok {
		return nil
	}
	return &Usage{
		CPUTimeMS: u.CPUTime.Milliseconds(), MemoryBytes: u.MemoryBytes, PeakMemoryBytes: u.PeakMemoryBytes,
		Processes: u.Processes, SampledAt: s.now(),
	}
}
