package e2bapi_test

import (
	"context"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

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

func TestWatchOverConnect(t *testing.T) {
	srv := newServer(t)
	sb := create(t, srv, `{}`)
	c := filesystemconnect.NewFilesystemClient(http.DefaultClient, srv.URL+"/e2b", connect.WithProtoJSON())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mk := connect.NewRequest(&filesystem.MakeDirRequest{Path: "watched"})
	sandboxHeaders(mk.Header(), sb)
	if _, err := c.MakeDir(ctx, mk); err != nil {
		t.Fatal(err)
	}
	watch := connect.NewRequest(&filesystem.WatchDirRequest{Path: "/home/user/watched", Recursive: true})
	sandboxHeaders(watch.Header(), sb)
	watch.Header().Set("Keepalive-Ping-Interval", "1")
	stream, err := c.WatchDir(ctx, watch)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	if !stream.Receive() || stream.Msg().GetStart() == nil {
		t.Fatalf("no start event: %v", stream.Err())
	}
	poll := connect.NewRequest(&filesystem.CreateWatcherRequest{Path: "watched"})
	sandboxHeaders(poll.Header(), sb)
	created, err := c.CreateWatcher(ctx, poll)
	if err != nil {
		t.Fatal(err)
	}
	h := envdHeader(sb)
	h["Content-Type"] = "application/octet-stream"
	if status, got := call(t, "POST", srv.URL+"/e2b/files?path=watched/new.txt", h, strings.NewReader("x")); status != 200 {
		t.Fatalf("POST /files = %d %s", status, got)
	}
	var keepalives int
	for stream.Receive() {
		if stream.Msg().GetKeepalive() != nil {
			keepalives++
		}
		if e := stream.Msg().GetFilesystem(); e != nil && e.GetName() == "new.txt" && e.GetType() == filesystem.EventType_EVENT_TYPE_CREATE {
			break
		}
	}
	if stream.Err() != nil {
		t.Fatalf("WatchDir ended: %v", stream.Err())
	}
	get := connect.NewRequest(&filesystem.GetWatcherEventsRequest{WatcherId: created.Msg.GetWatcherId()})
	sandboxHeaders(get.Header(), sb)
	var names []string
	for deadline := time.Now().Add(10 * time.Second); len(names) == 0 && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		got, err := c.GetWatcherEvents(ctx, get)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range got.Msg.GetEvents() {
			names = append(names, e.GetName())
		}
	}
	if !slices.Contains(names, "new.txt") {
		t.Errorf("GetWatcherEvents = %v, want new.txt", names)
	}
	rm := connect.NewRequest(&filesystem.RemoveWatcherRequest{WatcherId: created.Msg.GetWatcherId()})
	sandboxHeaders(rm.Header(), sb)
	if _, err := c.RemoveWatcher(ctx, rm); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetWatcherEvents(ctx, get); connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("GetWatcherEvents after RemoveWatcher = %v, want NotFound", err)
	}
	entry := connect.NewRequest(&filesystem.WatchDirRequest{Path: "watched", IncludeEntry: true})
	sandboxHeaders(entry.Header(), sb)
	s2, err := c.WatchDir(ctx, entry)
	if err == nil {
		for s2.Receive() {
		}
		err = s2.Err()
		s2.Close()
	}
	if connect.CodeOf(err) != connect.CodeUnimplemented {
		t.Errorf("WatchDir with include_entry = %v, want Unimplemented", err)
	}
}
