package backend

// FileIdentity names one version of a file: the file (device and
// inode) and its size, modification and change times, which any write
// to it moves. A file seen twice with the same identity holds the same
// bytes, unless something reset its clock.
type FileIdentity struct {
	Dev     uint64 `json:"dev"`
	Ino     uint64 `json:"ino"`
	Size    int64  `json:"size"`
	MtimeNS int64  `json:"mtime_ns"`
	CtimeNS int64  `json:"ctime_ns"`
}
