package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Report is the outcome of Verify.
type Report struct {
	Path  string `json:"path"`
	Lines int    `json:"lines"`
	OK    bool   `json:"ok"`
	// BrokenLine is the 1-based line where the chain first fails.
	BrokenLine int    `json:"broken_line,omitempty"`
	Problem    string `json:"problem,omitempty"`
	// Complete is true when the last event is run_end (a truncated tail
	// is otherwise undetectable by the chain alone).
	Complete bool `json:"complete"`
	// HeadSHA256 is the sha256 of the last line.
	HeadSHA256 string `json:"head_sha256,omitempty"`
}

// VerifyPath verifies a run directory (its audit.jsonl) or an audit file.
func VerifyPath(path string) (Report, error) {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		path = filepath.Join(path, "audit.jsonl")
	}
	f, err := os.Open(path)
	if err != nil {
		return Report{Path: path}, err
	}
	defer f.Close()
	r, err := Verify(f)
	r.Path = path
	return r, err
}

// Verify checks every line's prev_sha256 against the previous line, that
// sequence numbers count up from 1 and that every line is one JSON event.
// A chain failure is reported in the Report; the error is for I/O only.
func Verify(r io.Reader) (Report, error) {
	rep := Report{OK: true}
	br := bufio.NewReader(r)
	prev := Genesis
	var last string
	for {
		line, err := br.ReadBytes('\n')
		if len(line) == 0 && err == io.EOF {
			break
		}
		if err != nil && err != io.EOF {
			return rep, err
		}
		rep.Lines++
		if !bytes.HasSuffix(line, []byte("\n")) {
			return fail(rep, "last line has no newline (truncated write)"), nil
		}
		line = line[:len(line)-1]
		var e struct {
			Seq   int64  `json:"seq"`
			Event string `json:"event"`
			Prev  string `json:"prev_sha256"`
		}
		if jerr := json.Unmarshal(line, &e); jerr != nil {
			return fail(rep, "not a JSON event: "+jerr.Error()), nil
		}
		if e.Prev != prev {
			return fail(rep, fmt.Sprintf("prev_sha256 %q does not match the previous line's sha256 %q", e.Prev, prev)), nil
		}
		if e.Seq != int64(rep.Lines) {
			return fail(rep, fmt.Sprintf("seq %d, want %d", e.Seq, rep.Lines)), nil
		}
		prev = LineSHA256(line)
		last = e.Event
	}
	if rep.Lines == 0 {
		return fail(rep, "audit log is empty"), nil
	}
	rep.Complete = last == EventRunEnd
	rep.HeadSHA256 = prev
	return rep, nil
}

func fail(rep Report, problem string) Report {
	rep.OK = false
	rep.BrokenLine = rep.Lines
	if rep.BrokenLine == 0 {
		rep.BrokenLine = 1
	}
	rep.Problem = problem
	return rep
}
