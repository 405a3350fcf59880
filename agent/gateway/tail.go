package gateway

import (
	"bytes"
	"context"
	"io"
	"strings"

	"github.com/agent-runner/agent-runner/job"
)

// TailLogArgs are tail_log arguments.
type TailLogArgs struct {
	Path  string `json:"path" desc:"file under a read root"`
	Lines int    `json:"lines,omitempty" desc:"number of lines from the end (default 100, at most 10000)"`
}

// TailLogResult is the tail_log result.
type TailLogResult struct {
	Path  string   `json:"path"`
	Lines []string `json:"lines"`
	// Truncated is set when the scan stopped at MaxTailBytes before
	// finding enough lines.
	Truncated bool `json:"truncated"`
}

// tail_log bounds.
const (
	DefaultTailLines = 100
	MaxTailLines     = 10000
	MaxTailBytes     = 8 << 20
)

func tailLog(g *Gateway, a *TailLogArgs) (func(context.Context) (TailLogResult, error), *job.Error) {
	switch {
	case a.Lines == 0:
		a.Lines = DefaultTailLines
	case a.Lines < 0 || a.Lines > MaxTailLines:
		return nil, job.Errorf(job.CodeInvalidRequest, "lines must be between 1 and %d", MaxTailLines).With("lines", a.Lines)
	}
	loc, jerr := g.locateRead("path", a.Path)
	if jerr != nil {
		return nil, jerr
	}
	return func(ctx context.Context) (TailLogResult, error) {
		f, fi, err := openFile("path", a.Path, loc)
		if err != nil {
			return TailLogResult{}, err
		}
		defer f.Close()
		size := fi.Size()
		start := max(size-MaxTailBytes, 0)
		// Read backwards in chunks until enough newlines are seen.
		var data []byte
		const chunk = 64 << 10
		off := size
		for off > start && bytes.Count(data, []byte{'\n'}) <= a.Lines {
			n := min(int64(chunk), off-start)
			off -= n
			buf := make([]byte, n)
			if _, err := f.ReadAt(buf, off); err != nil && err != io.EOF {
				return TailLogResult{}, job.Wrap(job.CodeRunIOFailed, err, "read failed").With("path", a.Path)
			}
			data = append(buf, data...)
		}
		text := strings.TrimSuffix(string(data), "\n")
		lines := strings.Split(text, "\n")
		if text == "" {
			lines = []string{}
		}
		res := TailLogResult{Path: a.Path}
		// The first line may be partial when the scan did not reach offset 0.
		if off > 0 && len(lines) > 0 && len(lines) <= a.Lines {
			lines, res.Truncated = lines[1:], true
		}
		if len(lines) > a.Lines {
			lines = lines[len(lines)-a.Lines:]
		}
		res.Lines = lines
		return res, nil
	}, nil
}
