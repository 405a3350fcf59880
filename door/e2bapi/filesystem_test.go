package e2bapi_test

import (
	"context"
	"net/http"
	"sort"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/door/e2bapi/envd/filesystem"
	"github.com/agent-runner/agent-runner/door/e2bapi/envd/filesystem/filesystemconnect"
)

func TestFilesystemOverConnect(t *testing.T) {
	srv := newServer(t)
	sb := create(t, srv, `{}`)
	h := envdHeader(sb)
	h["Content-Type"] = "application/octet-stream"
	for _, p := range []string{"src/main.py", "src/lib/util.py"} {
		if status, got := call(t, "POST", srv.URL+"/e2b/files?path="+p, h, strings.NewReader("x = 1\n")); status != 200 {
			t.Fatalf("POST /files %s = %d %s", p, status, got)
		}
	}
	for name, opts := range codecs {
		t.Run(name, func(t *testing.T) {
			c := filesystemconnect.NewFilesystemClient(http.DefaultClient, srv.URL+"/e2b", opts...)
			ctx := context.Background()
			with := func(req interface{ Header() http.Header }) {
				sandboxHeaders(req.Header(), sb)
			}
			stat := connect.NewRequest(&filesystem.StatRequest{Path: "/home/user/src/main.py"})
			with(stat)
			got, err := c.Stat(ctx, stat)
			if err != nil {
				t.Fatal(err)
			}
			if e := got.Msg.GetEntry(); e.GetName() != "main.py" || e.GetPath() != "/workspace/src/main.py" || e.GetType() != filesystem.FileType_FILE_TYPE_FILE || e.GetSize() != 6 || e.GetPermissions() != "-rw-r--r--" || e.GetModifiedTime() == nil {
				t.Errorf("Stat = %v", e)
			}
			missing := connect.NewRequest(&filesystem.StatRequest{Path: "nope"})
			with(missing)
			if _, err := c.Stat(ctx, missing); connect.CodeOf(err) != connect.CodeNotFound {
				t.Errorf("Stat(nope) = %v, want NotFound", err)
			}
			outside := connect.NewRequest(&filesystem.StatRequest{Path: "/etc/passwd"})
			with(outside)
			if _, err := c.Stat(ctx, outside); connect.CodeOf(err) != connect.CodeInvalidArgument {
				t.Errorf("Stat(/etc/passwd) = %v, want InvalidArgument", err)
			}

			dir := "made-" + name
			mk := connect.NewRequest(&filesystem.MakeDirRequest{Path: dir + "/sub"})
			with(mk)
			if got, err := c.MakeDir(ctx, mk); err != nil || got.Msg.GetEntry().GetType() != filesystem.FileType_FILE_TYPE_DIRECTORY {
				t.Errorf("MakeDir = %v, %v", got, err)
			}
			if _, err := c.MakeDir(ctx, mk); connect.CodeOf(err) != connect.CodeAlreadyExists {
				t.Errorf("MakeDir again = %v, want AlreadyExists", err)
			}
			mv := connect.NewRequest(&filesystem.MoveRequest{Source: dir + "/sub", Destination: "/home/user/" + dir + "/renamed"})
			with(mv)
			if got, err := c.Move(ctx, mv); err != nil || got.Msg.GetEntry().GetPath() != "/workspace/"+dir+"/renamed" {
				t.Errorf("Move = %v, %v", got, err)
			}
			list := connect.NewRequest(&filesystem.ListDirRequest{Path: ".", Depth: 3})
			with(list)
			ls, err := c.ListDir(ctx, list)
			if err != nil {
				t.Fatal(err)
			}
			var paths []string
			for _, e := range ls.Msg.GetEntries() {
				if !strings.HasPrefix(e.GetPath(), "/workspace/made-") || strings.Contains(e.GetPath(), name) {
					paths = append(paths, e.GetPath())
				}
			}
			sort.Strings(paths)
			want := []string{"/workspace/" + dir, "/workspace/" + dir + "/renamed", "/workspace/src", "/workspace/src/lib", "/workspace/src/lib/util.py", "/workspace/src/main.py"}
			if !cmp.Equal(paths, want) {
				t.Errorf("ListDir(., 3) = %v, want %v", paths, want)
			}
			rm := connect.NewRequest(&filesystem.RemoveRequest{Path: dir})
			with(rm)
			if _, err := c.Remove(ctx, rm); err != nil {
				t.Errorf("Remove = %v", err)
			}
			if _, err := c.Remove(ctx, rm); connect.CodeOf(err) != connect.CodeNotFound {
				t.Errorf("Remove again = %v, want NotFound", err)
			}
		})
	}
}
