package auth

import (
	"bufio"
	"encoding/hex"
	"os"
	"strings"

	"github.com/agent-runner/agent-runner/job"
)

// ReadHashLines reads a file of hashed credentials, one per line,
//
//	sha256:<64 hex> <field>...
//
// with blank lines and # comments ignored, and calls fn with each line's
// number, hash and remaining fields. A line whose first field is not a
// SHA-256 hash (a plaintext token) is refused with want, the line's form
// for the message; what names the file in errors. Token files and the
// NATS workers file share it.
func ReadHashLines(path, what, want string, fn func(line int, hash [32]byte, fields []string) error) error {
	f, err := os.Open(path)
	if err != nil {
		return job.Wrap(job.CodeInvalidRequest, err, "cannot read the "+what)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		fields := strings.Fields(text)
		hexHash, ok := strings.CutPrefix(fields[0], "sha256:")
		raw, err := hex.DecodeString(hexHash)
		if !ok || err != nil || len(raw) != 32 || len(fields) < 2 {
			return job.Errorf(job.CodeInvalidRequest, "%s line %d: want %q", what, line, want)
		}
		var h [32]byte
		copy(h[:], raw)
		if err := fn(line, h, fields[1:]); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return job.Wrap(job.CodeInvalidRequest, err, "cannot read the "+what)
	}
	return nil
}
