package store

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/job"
)

func TestValidJobID(t *testing.T) {
	tests := []struct {
		id   string
		want bool
	}{
		{"job_0192a6e4-7b2c-7d9e-8f00-123456789abc", true},
		{"a", true},
		{"A.b-c_d", true},
		{"", false},
		{".", false},
		{"..", false},
		{".hidden", false},
		{"-flag", false},
		{"a/b", false},
		{"../x", false},
		{"a\x00b", false},
		{"a b", false},
		{strings.Repeat("a", 128), true},
		{strings.Repeat("a", 129), false},
	}
	for _, tt := range tests {
		if got := ValidJobID(tt.id); got != tt.want {
			t.Errorf("ValidJobID(%q) = %v, want %v", tt.id, got, tt.want)
		}
	}
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}

func TestRecordRoundTrip(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	id := "job_round-trip"
	if err := s.Create(id); err != nil {
		t.Fatal(err)
	}
	req := job.Request{JobID: id, Command: job.Command{Argv: []string{"true"}}}
	if err := s.WriteRequest(req); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteStatus(StatusRecord{JobID: id, Status: job.StatusRunning}); err != nil {
		t.Fatal(err)
	}
	res := job.Result{JobID: id, Status: job.StatusCompleted, Stdout: job.Output{Text: "hi\n"}}
	if err := s.WriteResult(res); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteStatus(StatusRecord{JobID: id, Status: job.StatusCompleted}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{RequestFile, ResultFile, StatusFile}, dirNames(t, s.RunDir(id))); diff != "" {
		t.Errorf("run dir (-want +got), no temp files may remain:\n%s", diff)
	}
	gotReq, err := s.ReadRequest(id)
	if err != nil || job.RequestSHA256(gotReq) != job.RequestSHA256(req) {
		t.Errorf("ReadRequest = %+v, %v", gotReq, err)
	}
	st, err := s.ReadStatus(id)
	if err != nil || st.Status != job.StatusCompleted || st.UpdatedAt.IsZero() {
		t.Errorf("ReadStatus = %+v, %v; want completed with updated_at", st, err)
	}
	gotRes, err := s.ReadResult(id)
	if err != nil || gotRes.Stdout.Text != "hi\n" || gotRes.Status != job.StatusCompleted {
		t.Errorf("ReadResult = %+v, %v", gotRes, err)
	}
	if !s.Exists(id) || s.Exists("job_other") || s.Exists("../runs") {
		t.Error("Exists is wrong")
	}
}

func TestReadErrors(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s.Create("job_corrupt")
	os.WriteFile(filepath.Join(s.RunDir("job_corrupt"), ResultFile), []byte(`{"job_id":`), 0o644)
	tests := []struct {
		name string
		id   string
		want job.Code
	}{
		{"missing run", "job_missing", job.CodeJobNotFound},
		{"invalid id", "../../etc", job.CodeJobNotFound},
		{"corrupt result", "job_corrupt", job.CodeRunIOFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.ReadResult(tt.id)
			if got := job.CodeOf(err); got != tt.want {
				t.Errorf("ReadResult(%q) = %v, want %s", tt.id, err, tt.want)
			}
		})
	}
}

func TestWritesRefuseInvalidIDs(t *testing.T) {
	root := t.TempDir()
	s, _ := Open(root)
	for _, id := range []string{"", "../escape", "a/b", ".."} {
		if err := s.Create(id); job.CodeOf(err) != job.CodeInvalidRequest {
			t.Errorf("Create(%q) = %v, want %s", id, err, job.CodeInvalidRequest)
		}
		if err := s.WriteResult(job.Result{JobID: id}); job.CodeOf(err) != job.CodeInvalidRequest {
			t.Errorf("WriteResult(%q) = %v, want %s", id, err, job.CodeInvalidRequest)
		}
	}
	if diff := cmp.Diff([]string{"runs"}, dirNames(t, root)); diff != "" {
		t.Errorf("store root (-want +got):\n%s", diff)
	}
}

func TestList(t *testing.T) {
	s, _ := Open(t.TempDir())
	for _, id := range []string{"job_b", "job_a", "job_c"} {
		s.Create(id)
	}
	os.WriteFile(filepath.Join(s.Dir(), "runs", "job_file"), nil, 0o644) // not a run dir
	os.Mkdir(filepath.Join(s.Dir(), "runs", ".tmp"), 0o755)              // not a valid id
	got, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"job_a", "job_b", "job_c"}, got); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
	s.Remove("job_b")
	if s.Exists("job_b") {
		t.Error("Remove left the run")
	}
}

// TestAtomicWrites checks every replacing writer: the new content lands in
// full, and a write that cannot be renamed into place leaves the old file
// and no temp file behind.
func TestAtomicWrites(t *testing.T) {
	writers := map[string]func(string, []byte, os.FileMode) error{
		"WriteFileAtomic":  WriteFileAtomic,
		"WriteFileReplace": WriteFileReplace,
	}
	for name, write := range writers {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			p := filepath.Join(dir, "status.json")
			if err := write(p, []byte("old"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := write(p, []byte("new content"), 0o644); err != nil {
				t.Fatal(err)
			}
			b, _ := os.ReadFile(p)
			fi, _ := os.Stat(p)
			if string(b) != "new content" || fi.Mode().Perm() != 0o644 {
				t.Errorf("file = %q mode %v, want the new content with 0644", b, fi.Mode().Perm())
			}
			// A directory in the way: the rename fails.
			blocked := filepath.Join(dir, "blocked")
			os.MkdirAll(filepath.Join(blocked, "child"), 0o755)
			err := write(blocked, []byte("x"), 0o644)
			if job.CodeOf(err) != job.CodeRunIOFailed {
				t.Errorf("write over a directory = %v, want %s", err, job.CodeRunIOFailed)
			}
			if diff := cmp.Diff([]string{"blocked", "status.json"}, dirNames(t, dir)); diff != "" {
				t.Errorf("dir after a failed write (-want +got), no temp file may remain:\n%s", diff)
			}
			if err := write(filepath.Join(dir, "no-such-dir", "f"), nil, 0o644); job.CodeOf(err) != job.CodeRunIOFailed {
				t.Errorf("write into a missing dir = %v, want %s", err, job.CodeRunIOFailed)
			}
		})
	}
}

func TestWriteFileOnce(t *testing.T) {
	p := filepath.Join(t.TempDir(), "stdout.txt")
	if err := WriteFileOnce(p, []byte("\xff\x00raw"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "\xff\x00raw" {
		t.Errorf("content = %q, want the exact bytes", b)
	}
	if err := WriteFileOnce(filepath.Join(p, "x"), nil, 0o644); job.CodeOf(err) != job.CodeRunIOFailed {
		t.Errorf("write under a file = %v, want %s", err, job.CodeRunIOFailed)
	}
}
