package validation

import (
	"github.com/agent-runner/agent-runner/job"
)

// DefaultLimits apply when neither the request nor the runner sets a limit.
var DefaultLimits = job.Limits{
	TimeoutMS:            120_000,
	MaxStdoutBytes:       1 << 20,
	MaxStderrBytes:       1 << 20,
	MaxArtifactBytes:     10 << 20,
	MaxArtifactFileBytes: 5 << 20,
	MaxArtifactCount:     128,
	MaxRunRecordBytes:    64 << 20,
	MemoryMB:             1024,
	CPUCount:             2,
	MaxProcesses:         256,
	// TmpMB has no fixed default: see DefaultTmpMB. DiskMB has none
	// (an unlimited workspace unless the runner sets Defaults.DiskMB);
	// DiskInodes follows DiskMB: see DefaultDiskInodes.
}

// MinDefaultTmpMB is the smallest /tmp a job gets without asking.
const MinDefaultTmpMB = 1024

// DefaultTmpMB is the /tmp size of a job that sets neither limits.tmp_mb
// nor a runner default: max(1024, memory_mb). Builds write their
// temporaries there (go test links each test binary under /tmp), and a
// tmpfs's pages are charged to the job's memory cgroup anyway, so /tmp
// can never hold more than memory_mb in practice: past it the job is
// OOM-killed (memory enforced) rather than told ENOSPC.
func DefaultTmpMB(memoryMB int64) int64 { return max(MinDefaultTmpMB, memoryMB) }

// DefaultMax are the runner maxima when none are configured.
var DefaultMax = job.Limits{
	TimeoutMS:            24 * 3600 * 1000,
	MaxStdoutBytes:       64 << 20,
	MaxStderrBytes:       64 << 20,
	MaxArtifactBytes:     1 << 30,
	MaxArtifactFileBytes: 512 << 20,
	MaxArtifactCount:     10_000,
	MaxRunRecordBytes:    4 << 30,
	MemoryMB:             64 << 10,
	CPUCount:             64,
	MaxProcesses:         32_768,
	TmpMB:                16 << 10,
	DiskMB:               64 << 10,
	DiskInodes:           16 << 20,
}

type limitField struct {
	name string
	get  func(*job.Limits) *int64
}

var limitFields = []limitField{
	{"timeout_ms", func(l *job.Limits) *int64 { return &l.TimeoutMS }},
	{"max_stdout_bytes", func(l *job.Limits) *int64 { return &l.MaxStdoutBytes }},
	{"max_stderr_bytes", func(l *job.Limits) *int64 { return &l.MaxStderrBytes }},
	{"max_artifact_bytes", func(l *job.Limits) *int64 { return &l.MaxArtifactBytes }},
	{"max_artifact_file_bytes", func(l *job.Limits) *int64 { return &l.MaxArtifactFileBytes }},
	{"max_artifact_count", func(l *job.Limits) *int64 { return &l.MaxArtifactCount }},
	{"max_run_record_bytes", func(l *job.Limits) *int64 { return &l.MaxRunRecordBytes }},
	{"memory_mb", func(l *job.Limits) *int64 { return &l.MemoryMB }},
	{"cpu_count", func(l *job.Limits) *int64 { return &l.CPUCount }},
	{"max_processes", func(l *job.Limits) *int64 { return &l.MaxProcesses }},
	{"tmp_mb", func(l *job.Limits) *int64 { return &l.TmpMB }},
	{"disk_mb", func(l *job.Limits) *int64 { return &l.DiskMB }},
	{"disk_inodes", func(l *job.Limits) *int64 { return &l.DiskInodes }},
}

// limits rejects negative values and values over the maxima, then fills
// zeros from the configured defaults, then DefaultLimits.
func limits(l *job.Limits, cfg Config) error {
	askedInodes := l.DiskInodes > 0
	for _, f := range limitFields {
		v := f.get(l)
		max := *f.get(&cfg.Max)
		if max == 0 {
			max = *f.get(&DefaultMax)
		}
		switch {
		case *v < 0:
			return job.Errorf(job.CodeInvalidRequest, "limits.%s must be positive", f.name).With("field", "limits."+f.name)
		case *v > max:
			return job.Errorf(job.CodeLimitExceeded, "limits.%s exceeds the runner maximum", f.name).
				With("field", "limits."+f.name).With("max", max).With("value", *v)
		case *v == 0:
			*v = *f.get(&cfg.Defaults)
			if *v == 0 {
				*v = *f.get(&DefaultLimits)
			}
			switch {
			case *v != 0:
			case f.name == "tmp_mb":
				*v = DefaultTmpMB(l.MemoryMB) // memory_mb is filled first
			case f.name == "disk_inodes":
				*v = DefaultDiskInodes(l.DiskMB) // so is disk_mb
			}
			if *v > max {
				*v = max
			}
		}
	}
	switch {
	case l.DiskMB > 0:
	case askedInodes:
		return job.Errorf(job.CodeInvalidRequest, "limits.disk_inodes needs limits.disk_mb: the inode cap belongs to the size-limited workspace").
			With("field", "limits.disk_inodes")
	default:
		l.DiskInodes = 0 // a runner default alone caps nothing
	}
	return nil
}

// InodesPerDiskMB is how many files and directories a job's workspace
// may hold per MiB of limits.disk_mb when it sets no disk_inodes: one per
// 8 KiB, twice ext4's default, as source trees are many small files.
const InodesPerDiskMB = 128

// MinDefaultDiskInodes is the fewest a derived inode cap allows.
const MinDefaultDiskInodes = 4096

// DefaultDiskInodes is the inode cap of a job that sets limits.disk_mb
// but neither limits.disk_inodes nor a runner default: max(4096,
// 128 * disk_mb); zero (no cap) without disk_mb.
func DefaultDiskInodes(diskMB int64) int64 {
	if diskMB <= 0 {
		return 0
	}
	return max(MinDefaultDiskInodes, InodesPerDiskMB*diskMB)
}
