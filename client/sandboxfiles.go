package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/agent-runner/agent-runner/job"
)

// SandboxFile is one entry of a sandbox's workspace, as lstat describes
// it: Type is file, dir, symlink or other; Mode four octal digits
// ("0644"); SymlinkTarget a symlink's target (StatSandboxFile only).
type SandboxFile struct {
	Name          string    `json:"name"`
	Path          string    `json:"path"`
	Type          string    `json:"type"`
	Size          int64     `json:"size"`
	Mode          string    `json:"mode"`
	ModifiedAt    time.Time `json:"modified_at"`
	SymlinkTarget string    `json:"symlink_target,omitempty"`
}

// SandboxListing is a directory of a sandbox's workspace, its entries
// sorted by name; Truncated says the server's cap cut it.
type SandboxListing struct {
	Path      string        `json:"path"`
	Entries   []SandboxFile `json:"entries"`
	Truncated bool          `json:"truncated"`
}

func filesPath(id, path string) string {
	return sandboxPath(id) + "/files?" + url.Values{"path": {path}}.Encode()
}

// ListSandboxFiles lists the directory path of the sandbox's workspace
// ("" is its root); a path that is not a directory is
// validation.invalid_request.
func (c *Client) ListSandboxFiles(ctx context.Context, id, path string) (SandboxListing, error) {
	var out SandboxListing
	resp, err := c.do(ctx, http.MethodGet, filesPath(id, path), nil, nil)
	if err != nil {
		return out, err
	}
	defer resp.Body.Close()
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "application/json" {
		return out, job.Errorf(job.CodeInvalidRequest, "%s is not a directory", path).With("path", path)
	}
	return out, json.NewDecoder(resp.Body).Decode(&out)
}

// StatSandboxFile describes path of the sandbox's workspace without
// following a symlink there.
func (c *Client) StatSandboxFile(ctx context.Context, id, path string) (SandboxFile, error) {
	var out SandboxFile
	return out, c.getJSON(ctx, sandboxPath(id)+"/files/stat?"+url.Values{"path": {path}}.Encode(), &out)
}

// RemoveSandboxFile removes path of the sandbox's workspace: a file, a
// symlink or an empty directory, or with recursive a directory and all
// it holds (a symlink inside is unlinked, never followed).
func (c *Client) RemoveSandboxFile(ctx context.Context, id, path string, recursive bool) error {
	q := url.Values{"path": {path}, "recursive": {strconv.FormatBool(recursive)}}
	resp, err := c.do(ctx, http.MethodDelete, sandboxPath(id)+"/files?"+q.Encode(), nil, nil)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// MoveSandboxFile renames from to to within the sandbox's workspace,
// creating to's missing parents; what is at to is replaced unless it is
// a directory with entries (session.directory_not_empty).
func (c *Client) MoveSandboxFile(ctx context.Context, id, from, to string) error {
	var out struct{ From, To string }
	return c.postJSON(ctx, sandboxPath(id)+"/files/move", map[string]string{"from": from, "to": to}, &out)
}

// ReadSandboxFileRange writes length bytes of the sandbox's file path
// from offset to w (length <= 0: to its end; a negative offset: its
// last -offset bytes) and returns the file's size. A range past its end
// is validation.range_not_satisfiable.
func (c *Client) ReadSandboxFileRange(ctx context.Context, id, path string, offset, length int64, w io.Writer) (int64, error) {
	rng := fmt.Sprintf("bytes=%d-", offset)
	switch {
	case offset < 0:
		rng = fmt.Sprintf("bytes=-%d", -offset)
	case length > 0:
		rng = fmt.Sprintf("bytes=%d-%d", offset, offset+length-1)
	}
	resp, err := c.do(ctx, http.MethodGet, filesPath(id, path), nil, http.Header{"Range": {rng}})
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if err := notDirectory(resp, path); err != nil {
		return 0, err
	}
	n, err := io.Copy(w, resp.Body)
	if err != nil {
		return 0, job.Wrap(job.CodeRunIOFailed, err, "cannot read the file's bytes").With("path", path)
	}
	// 206: "bytes a-b/size"; 200 (an empty file): the whole of it.
	if cr := resp.Header.Get("Content-Range"); resp.StatusCode == http.StatusPartialContent && cr != "" {
		_, size, _ := strings.Cut(cr, "/")
		if v, err := strconv.ParseInt(size, 10, 64); err == nil {
			return v, nil
		}
	}
	return n, nil
}

// notDirectory fails when the files route answered a directory's
// listing (JSON) where a file's bytes were asked for.
func notDirectory(resp *http.Response, path string) error {
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "application/json" {
		return job.Errorf(job.CodeInvalidRequest, "%s is a directory", path).With("path", path)
	}
	return nil
}
