package store

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/job"
)

// writeMarker is a claim's first file in these tests.
func writeMarker(dir string) error {
	return os.WriteFile(filepath.Join(dir, "first.txt"), []byte("first"), RecordFileMode)
}

// TestValidIDKeepsEveryCallersID: job ids, task ids (given and minted)
// and capability-run ids all follow the one rule.
func TestValidIDKeepsEveryCallersID(t *testing.T) {
	for _, id := range []string{
		"job_0192a6e4-7b2c-7d9e-8f00-123456789abc",  // minted job id
		"task-3b241101-e2bb-4255-8caf-4136c566a962", // minted task id
		"same-id", "build.v2", "A_b", // caller-chosen
		"6f1d0c53-7a38-4a4e-9d51-0c3c1f4f9a10", // capability run
	} {
		if !ValidID(id) {
			t.Errorf("ValidID(%q) = false, want true", id)
		}
	}
	for _, id := range []string{"", ".", "..", ".claim-1", ".trash-1", ".locks", "a/b", "-x"} {
		if ValidID(id) {
			t.Errorf("ValidID(%q) = true, want false", id)
		}
	}
}

// TestConcurrentClaimsEveryKind: for each kind, 200 concurrent claims of
// one id with one digest create one record and none fails; a different
// digest is job.conflict naming the kind's id field, with the jobs
// door's code and so its 409.
func TestConcurrentClaimsEveryKind(t *testing.T) {
	for _, k := range []Kind{Tasks, CapabilityRuns} {
		t.Run(k.Name, func(t *testing.T) {
			r, err := OpenRecords(filepath.Join(t.TempDir(), k.Dir), k)
			if err != nil {
				t.Fatal(err)
			}
			var (
				wg      sync.WaitGroup
				mu      sync.Mutex
				created int
				errs    []error
			)
			for range 200 {
				wg.Go(func() {
					ok, err := r.Claim("same-id", "digest-a", writeMarker)
					mu.Lock()
					defer mu.Unlock()
					if ok {
						created++
					}
					if err != nil {
						errs = append(errs, err)
					}
				})
			}
			wg.Wait()
			if created != 1 || len(errs) != 0 {
				t.Fatalf("%d claims created the record, %d failed (first: %v); want 1 and 0", created, len(errs), first(errs))
			}
			if diff := cmp.Diff([]string{"first.txt", DigestFile}, dirNames(t, r.Path("same-id"))); diff != "" {
				t.Errorf("record (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{"same-id"}, dirNames(t, r.Dir())); diff != "" {
				t.Errorf("records dir (-want +got), no staging may remain:\n%s", diff)
			}
			_, err = r.Claim("same-id", "digest-b", writeMarker)
			if je := job.AsError(err); je == nil || je.Code != job.CodeJobConflict || je.Details[k.IDField] != "same-id" {
				t.Errorf("claim with another digest = %v, want %s with %s", err, job.CodeJobConflict, k.IDField)
			}
			if got, want := job.StatusFor(job.CodeOf(err)), job.StatusFor(job.CodeJobConflict); got != want {
				t.Errorf("status of the conflict = %v, want %v", got, want)
			}
			if _, err := r.Claim("../x", "d", writeMarker); job.CodeOf(err) != job.CodeInvalidRequest {
				t.Errorf("claim of an invalid id = %v, want %s", err, job.CodeInvalidRequest)
			}
		})
	}
}

// TestFailedClaimLeavesNothing: a claim whose first files cannot be
// written leaves no record and no staging directory.
func TestFailedClaimLeavesNothing(t *testing.T) {
	r, err := OpenRecords(t.TempDir(), Tasks)
	if err != nil {
		t.Fatal(err)
	}
	boom := job.Errorf(job.CodeRunIOFailed, "disk full")
	if _, err := r.Claim("t1", "d", func(string) error { return boom }); err != boom {
		t.Errorf("Claim = %v, want the writer's error", err)
	}
	if names := dirNames(t, r.Dir()); len(names) != 0 {
		t.Errorf("records dir holds %v, want nothing", names)
	}
}

// claimHelperEnv makes TestClaimHelper a claimant in another process:
// "DIR:ID:DIGEST:N" makes N concurrent claims and prints how many created
// the record and how many were conflicts.
const claimHelperEnv = "STORE_CLAIM_HELPER"

func TestClaimHelper(t *testing.T) {
	spec := os.Getenv(claimHelperEnv)
	if spec == "" {
		t.Skip("runs only as another process of TestClaimsAcrossProcesses")
	}
	parts := strings.Split(spec, ":")
	n, _ := strconv.Atoi(parts[3])
	r, err := OpenRecords(parts[0], Tasks)
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg                 sync.WaitGroup
		mu                 sync.Mutex
		created, conflicts int
	)
	for range n {
		wg.Go(func() {
			ok, err := r.Claim(parts[1], parts[2], writeMarker)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case ok:
				created++
			case job.CodeOf(err) == job.CodeJobConflict:
				conflicts++
			case err != nil:
				t.Errorf("Claim = %v", err)
			}
		})
	}
	wg.Wait()
	fmt.Printf("claims %d %d\n", created, conflicts)
}

// TestClaimsAcrossProcesses: eight processes sharing one directory, 25
// claims of one id each, create one record; a ninth process claiming it
// with another digest gets only conflicts.
func TestClaimsAcrossProcesses(t *testing.T) {
	dir := t.TempDir()
	run := func(digest string) *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^TestClaimHelper$", "-test.v")
		cmd.Env = append(os.Environ(), claimHelperEnv+"="+dir+":shared-id:"+digest+":25")
		return cmd
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		outs []string
	)
	for range 8 {
		wg.Go(func() {
			out, err := run("digest-a").CombinedOutput()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Errorf("helper: %v\n%s", err, out)
			}
			outs = append(outs, string(out))
		})
	}
	wg.Wait()
	created := 0
	for _, out := range outs {
		var c, x int
		if _, err := fmt.Sscanf(out[strings.Index(out, "claims "):], "claims %d %d", &c, &x); err != nil {
			t.Fatalf("helper said %q", out)
		}
		created += c
		if x != 0 {
			t.Errorf("a helper with the same digest got %d conflicts", x)
		}
	}
	if created != 1 {
		t.Errorf("%d of 200 claims in 8 processes created the record, want 1", created)
	}
	out, err := run("digest-b").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "claims 0 25") {
		t.Errorf("another digest: %v %s, want 0 created and 25 conflicts", err, out)
	}
}

// TestRetainEveryKind: each kind's terminal records older than their age
// go; records in progress (not terminal, locked by a process, or busy in
// this one), young ones, kept-forever ones and ones whose release fails
// stay; staging left by a dead process goes once it is stale.
func TestRetainEveryKind(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	old, young := now.Add(-48*time.Hour), now.Add(-time.Hour)
	endings := map[string]Ending{
		"old-done":      {Terminal: true, At: old, Keep: 24 * time.Hour},
		"young-done":    {Terminal: true, At: young, Keep: 24 * time.Hour},
		"old-active":    {Terminal: false, At: old, Keep: 24 * time.Hour},
		"old-locked":    {Terminal: true, At: old, Keep: 24 * time.Hour},
		"old-busy":      {Terminal: true, At: old, Keep: 24 * time.Hour},
		"old-forever":   {Terminal: true, At: old},
		"old-unrelease": {Terminal: true, At: old, Keep: 24 * time.Hour},
		"unreadable":    {},
	}
	for _, k := range []Kind{Jobs, Tasks, CapabilityRuns} {
		t.Run(k.Name, func(t *testing.T) {
			s, err := Open(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			r, err := s.Records(k)
			if err != nil {
				t.Fatal(err)
			}
			for id := range endings {
				if _, err := r.Claim(id, "d", writeMarker); err != nil {
					t.Fatal(err)
				}
			}
			unlock, err := r.Lock(context.Background(), "old-locked", false)
			if err != nil {
				t.Fatal(err)
			}
			defer unlock()
			stale := filepath.Join(r.Dir(), claimPrefix+"dead")
			fresh := filepath.Join(r.Dir(), trashPrefix+"live")
			for _, d := range []string{stale, fresh} {
				os.Mkdir(d, 0o700)
			}
			os.Chtimes(stale, old, old)
			os.Chtimes(fresh, now, now)
			var released, skipped []string
			removed, err := r.Retain(now, Expiry{
				Ended: func(id string) (Ending, error) {
					if id == "unreadable" {
						return Ending{}, job.Errorf(job.CodeRunIOFailed, "corrupt")
					}
					return endings[id], nil
				},
				Busy: func(id string) bool { return id == "old-busy" },
				Release: func(id string) error {
					released = append(released, id)
					if id == "old-unrelease" {
						return job.Errorf(job.CodeRunIOFailed, "busy mount")
					}
					return nil
				},
				Skipped: func(id string, err error) { skipped = append(skipped, id) },
			})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{"old-done"}, removed); diff != "" {
				t.Errorf("removed (-want +got):\n%s", diff)
			}
			want := []string{"old-active", "old-busy", "old-forever", "old-locked", "old-unrelease", "unreadable", "young-done"}
			if got, _ := r.List(); !cmp.Equal(want, got) {
				t.Errorf("kept %v, want %v", got, want)
			}
			if diff := cmp.Diff([]string{"old-done", "old-unrelease"}, released); diff != "" {
				t.Errorf("released (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{"old-unrelease", "unreadable"}, skipped); diff != "" {
				t.Errorf("skipped (-want +got):\n%s", diff)
			}
			if _, err := os.Stat(stale); !os.IsNotExist(err) {
				t.Errorf("stale staging %s stayed", stale)
			}
			if _, err := os.Stat(fresh); err != nil {
				t.Errorf("live trash %s was removed: %v", fresh, err)
			}
		})
	}
}

// crashHelperEnv makes TestCrashHelper a process that is killed between
// a complete temp file (or staging directory) and its rename:
// "write:PATH" replaces PATH, "claim:DIR:ID" claims a task id.
const crashHelperEnv = "STORE_CRASH_HELPER"

func TestCrashHelper(t *testing.T) {
	spec := os.Getenv(crashHelperEnv)
	if spec == "" {
		t.Skip("runs only as another process of TestCrashBetweenWriteAndRename")
	}
	beforeRename = func(string) { syscall.Kill(os.Getpid(), syscall.SIGKILL) }
	parts := strings.Split(spec, ":")
	switch parts[0] {
	case "write":
		WriteFileAtomic(parts[1], []byte(`{"state":"new"}`), RecordFileMode)
	case "claim":
		r, _ := OpenRecords(parts[1], Tasks)
		r.Claim(parts[2], "d", writeMarker)
	}
	t.Fatal("the helper was not killed before the rename")
}

// TestCrashBetweenWriteAndRename: a process killed after writing a
// complete temp file but before renaming it leaves the old file whole,
// and a claim killed there leaves no record: the id stays free, the
// staging is never listed, and retention sweeps it once stale.
func TestCrashBetweenWriteAndRename(t *testing.T) {
	crash := func(spec string) {
		t.Helper()
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashHelper$")
		cmd.Env = append(os.Environ(), crashHelperEnv+"="+spec)
		err := cmd.Run()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("helper %s ended with %v, want killed by SIGKILL", spec, err)
		}
	}

	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	if err := WriteFileAtomic(path, []byte(`{"state":"old"}`), RecordFileMode); err != nil {
		t.Fatal(err)
	}
	crash("write:" + path)
	if b, _ := os.ReadFile(path); string(b) != `{"state":"old"}` {
		t.Errorf("after the crash state.json = %q, want the old content", b)
	}
	names := dirNames(t, dir)
	if len(names) != 2 || !strings.HasPrefix(names[0], ".state.json.tmp-") {
		t.Errorf("dir holds %v, want state.json and the dead writer's temp file", names)
	}

	recs := filepath.Join(t.TempDir(), "tasks")
	r, err := OpenRecords(recs, Tasks)
	if err != nil {
		t.Fatal(err)
	}
	crash("claim:" + recs + ":t1")
	if ids, _ := r.List(); len(ids) != 0 || r.Exists("t1") {
		t.Errorf("after a crashed claim the records are %v, want none", ids)
	}
	if ok, err := r.Claim("t1", "d", writeMarker); !ok || err != nil {
		t.Errorf("claim after the crash = %v, %v; want created", ok, err)
	}
	later := time.Now().Add(2 * staleStaging)
	if _, err := r.Retain(later, Expiry{Ended: func(string) (Ending, error) { return Ending{}, nil }}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"t1"}, dirNames(t, recs)); diff != "" {
		t.Errorf("after retention (-want +got), the dead claim's staging must be gone:\n%s", diff)
	}
}

// TestRemoveNeverFollowsASymlink: a record replaced by a symlink to a
// directory outside the store (planted by whoever could write there) is
// never listed, so retention never reaches it, a claim of its id writes
// nothing through it, and removing its id removes the link, never what
// it points at.
func TestRemoveNeverFollowsASymlink(t *testing.T) {
	r, err := OpenRecords(filepath.Join(t.TempDir(), "tasks"), Tasks)
	if err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	victim := filepath.Join(outside, "precious.txt")
	os.WriteFile(victim, []byte("keep"), 0o600)
	if err := os.Symlink(outside, r.Path("planted")); err != nil {
		t.Fatal(err)
	}
	if ids, _ := r.List(); len(ids) != 0 {
		t.Errorf("List = %v, want the symlink left out", ids)
	}
	removed, err := r.Retain(time.Now().Add(365*24*time.Hour), Expiry{
		Ended: func(string) (Ending, error) { return Ending{Terminal: true, Keep: time.Second}, nil },
	})
	if err != nil || len(removed) != 0 {
		t.Errorf("Retain = %v, %v; want nothing removed", removed, err)
	}
	if ok, err := r.Claim("planted", "d", writeMarker); ok || err == nil {
		t.Errorf("Claim over the link = %v, %v; want refused", ok, err)
	}
	if names := dirNames(t, outside); !cmp.Equal(names, []string{"precious.txt"}) {
		t.Errorf("the claim wrote through the link: %v", names)
	}
	if err := r.Remove("planted"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(r.Path("planted")); !os.IsNotExist(err) {
		t.Errorf("the link is still there: %v", err)
	}
	if b, err := os.ReadFile(victim); err != nil || string(b) != "keep" {
		t.Errorf("the link's target lost %s: %q, %v", victim, b, err)
	}
}
