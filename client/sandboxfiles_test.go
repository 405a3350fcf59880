package client_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/client"
	"github.com/agent-runner/agent-runner/job"
)

// TestSandboxFilesClient: list, stat, ranged reads, moves and removal
// against the real sessions door.
func TestSandboxFilesClient(t *testing.T) {
	c := sessionServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.CreateSandbox(ctx, client.SandboxRequest{ID: "fs-1"}); err != nil {
		t.Fatal(err)
	}
	if err := c.WriteSandboxFile(ctx, "fs-1", "src/a.txt", []byte("0123456789"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SandboxExec(ctx, "fs-1", client.ExecRequest{Argv: []string{"ln", "-s", "a.txt", "src/link"}}); err != nil {
		t.Fatal(err)
	}
	list, err := c.ListSandboxFiles(ctx, "fs-1", "src")
	var got []string
	for _, e := range list.Entries {
		got = append(got, e.Path+" "+e.Type+" "+e.Mode)
	}
	if diff := cmp.Diff([]string{"src/a.txt file 0600", "src/link symlink 0777"}, got); err != nil || diff != "" || list.Path != "src" {
		t.Errorf("ListSandboxFiles(src) = %v (-want +got)\n%s", err, diff)
	}
	if st, err := c.StatSandboxFile(ctx, "fs-1", "src/link"); err != nil || st.Type != "symlink" || st.SymlinkTarget != "a.txt" {
		t.Errorf("StatSandboxFile(src/link) = %+v, %v; want a symlink to a.txt", st, err)
	}
	for _, tc := range []struct {
		offset, length int64
		want           string
	}{{2, 3, "234"}, {7, 0, "789"}, {-4, 0, "6789"}} {
		var buf bytes.Buffer
		size, err := c.ReadSandboxFileRange(ctx, "fs-1", "src/a.txt", tc.offset, tc.length, &buf)
		if err != nil || size != 10 || buf.String() != tc.want {
			t.Errorf("ReadSandboxFileRange(%d, %d) = %q, %d, %v; want %q of 10", tc.offset, tc.length, buf.String(), size, err, tc.want)
		}
	}
	var buf bytes.Buffer
	_, err = c.ReadSandboxFileRange(ctx, "fs-1", "src/a.txt", 10, 0, &buf)
	assertCode(t, "ReadSandboxFileRange(past the end)", err, job.CodeRangeNotSatisfiable)
	assertCode(t, "ReadSandboxFile(a directory)", c.ReadSandboxFile(ctx, "fs-1", "src", &buf), job.CodeInvalidRequest)
	_, err = c.ListSandboxFiles(ctx, "fs-1", "src/a.txt")
	assertCode(t, "ListSandboxFiles(a file)", err, job.CodeInvalidRequest)

	if err := c.MoveSandboxFile(ctx, "fs-1", "src/a.txt", "dst/b.txt"); err != nil {
		t.Errorf("MoveSandboxFile = %v", err)
	}
	buf.Reset()
	if err := c.ReadSandboxFile(ctx, "fs-1", "dst/b.txt", &buf); err != nil || buf.String() != "0123456789" {
		t.Errorf("after the move: %q, %v", buf.String(), err)
	}
	assertCode(t, "RemoveSandboxFile(src)", c.RemoveSandboxFile(ctx, "fs-1", "src", false), job.CodeDirectoryNotEmpty)
	if err := c.RemoveSandboxFile(ctx, "fs-1", "src", true); err != nil {
		t.Errorf("RemoveSandboxFile(src, recursive) = %v", err)
	}
	_, err = c.StatSandboxFile(ctx, "fs-1", "src")
	assertCode(t, "StatSandboxFile(removed)", err, job.CodeJobNotFound)
	assertCode(t, "MoveSandboxFile(escape)", c.MoveSandboxFile(ctx, "fs-1", "dst", "../x"), job.CodePathEscape)
}
