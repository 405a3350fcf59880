package gateway

import (
	"bufio"
	"context"
	"io"
	"path"
	"strings"

	"github.com/agent-runner/agent-runner/agent/rootfs"
	"github.com/agent-runner/agent-runner/job"
)

// GrepLogArgs are grep_log arguments.
type GrepLogArgs struct {
	Path       string `json:"path" desc:"file or directory under a read root; directories are searched recursively"`
	Pattern    string `json:"pattern" desc:"substring to find (not a regular expression)"`
	MaxMatches int    `json:"max_matches,omitempty" desc:"stop after this many matches (default and maximum 1000)"`
}

// Match is one matching line.
type Match struct {
	Path string `json:"path"`
	Line int    `json:"line"`
	Text string `json:"text"`
}

// Skipped is a path the directory walk did not search, with the reason.
type Skipped struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// GrepLogResult is the grep_log result.
type GrepLogResult struct {
	Path          string    `json:"path"`
	Pattern       string    `json:"pattern"`
	Matches       []Match   `json:"matches"`
	FilesSearched int       `json:"files_searched"`
	Skipped       []Skipped `json:"skipped,omitempty"`
	Truncated     bool      `json:"truncated"`
}

// grep_log bounds.
const (
	MaxGrepMatches   = 1000
	MaxGrepFiles     = 1000
	MaxGrepDepth     = 16
	MaxGrepLineBytes = 4096
	maxScanLine      = 1 << 20
)

func grepLog(g *Gateway, a *GrepLogArgs) (func(context.Context) (GrepLogResult, error), *job.Error) {
	if a.Pattern == "" {
		return nil, job.Errorf(job.CodeInvalidRequest, "pattern must not be empty")
	}
	switch {
	case a.MaxMatches == 0:
		a.MaxMatches = MaxGrepMatches
	case a.MaxMatches < 0 || a.MaxMatches > MaxGrepMatches:
		return nil, job.Errorf(job.CodeInvalidRequest, "max_matches must be between 1 and %d", MaxGrepMatches)
	}
	loc, jerr := g.locateRead("path", a.Path)
	if jerr != nil {
		return nil, jerr
	}
	return func(ctx context.Context) (GrepLogResult, error) {
		res := GrepLogResult{Path: a.Path, Pattern: a.Pattern, Matches: []Match{}}
		f, err := rootfs.Open(loc, 0)
		if err != nil {
			return res, openErr("path", a.Path, err)
		}
		fi, err := f.Stat()
		f.Close()
		if err != nil {
			return res, job.Wrap(job.CodeRunIOFailed, err, "stat failed")
		}
		w := grepWalk{g: g, a: a, res: &res}
		if fi.IsDir() {
			err = w.dir(ctx, a.Path, 0)
		} else {
			err = w.file(a.Path, loc)
		}
		return res, err
	}, nil
}

type grepWalk struct {
	g   *Gateway
	a   *GrepLogArgs
	res *GrepLogResult
}

func (w *grepWalk) full() bool {
	return w.res.Truncated
}

// dir searches the directory at the caller-visible path p. Every child
// path is checked against policy again and opened through rootfs.
func (w *grepWalk) dir(ctx context.Context, p string, depth int) error {
	if depth > MaxGrepDepth {
		w.res.Skipped = append(w.res.Skipped, Skipped{Path: p, Reason: "too deep"})
		return nil
	}
	loc, jerr := w.g.locateRead("path", p)
	if jerr != nil {
		w.res.Skipped = append(w.res.Skipped, Skipped{Path: p, Reason: jerr.Message})
		return nil
	}
	d, err := openDir("path", p, loc)
	if err != nil {
		w.res.Skipped = append(w.res.Skipped, Skipped{Path: p, Reason: job.AsError(err).Message})
		return nil
	}
	ents, err := d.ReadDir(MaxListEntries)
	d.Close()
	if err != nil && err != io.EOF {
		return job.Wrap(job.CodeRunIOFailed, err, "read directory").With("path", p)
	}
	sortEntries(ents)
	for _, e := range ents {
		if err := ctx.Err(); err != nil {
			return job.Wrap(job.CodeRunCanceled, err, "grep canceled")
		}
		if w.full() {
			return nil
		}
		child := path.Join(p, e.Name())
		switch {
		case e.IsDir():
			if err := w.dir(ctx, child, depth+1); err != nil {
				return err
			}
		case e.Type().IsRegular():
			cloc, jerr := w.g.locateRead("path", child)
			if jerr != nil {
				w.res.Skipped = append(w.res.Skipped, Skipped{Path: child, Reason: jerr.Message})
				continue
			}
			if err := w.file(child, cloc); err != nil {
				w.res.Skipped = append(w.res.Skipped, Skipped{Path: child, Reason: job.AsError(err).Message})
			}
		default:
			w.res.Skipped = append(w.res.Skipped, Skipped{Path: child, Reason: "not a regular file or directory (symlinks are not followed)"})
		}
	}
	return nil
}

func (w *grepWalk) file(p string, loc rootfs.Location) error {
	if w.res.FilesSearched >= MaxGrepFiles {
		w.res.Truncated = true
		return nil
	}
	f, _, err := openFile("path", p, loc)
	if err != nil {
		return err
	}
	defer f.Close()
	w.res.FilesSearched++
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), maxScanLine)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if !strings.Contains(line, w.a.Pattern) {
			continue
		}
		if len(w.res.Matches) >= w.a.MaxMatches {
			w.res.Truncated = true
			return nil
		}
		if len(line) > MaxGrepLineBytes {
			line = line[:MaxGrepLineBytes]
		}
		w.res.Matches = append(w.res.Matches, Match{Path: p, Line: n, Text: line})
	}
	if err := sc.Err(); err != nil {
		return job.Wrap(job.CodeRunIOFailed, err, "read failed").With("path", p)
	}
	return nil
}
