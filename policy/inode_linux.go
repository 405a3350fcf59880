package policy

import (
	"os"
	"syscall"

	"github.com/agent-runner/agent-runner/backend"
)

// identity is the identity of the file fi describes.
func identity(fi os.FileInfo) backend.FileIdentity {
	id := backend.FileIdentity{Size: fi.Size(), MtimeNS: fi.ModTime().UnixNano()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		id.Dev, id.Ino, id.CtimeNS = uint64(st.Dev), st.Ino, st.Ctim.Nano()
	}
	return id
}
