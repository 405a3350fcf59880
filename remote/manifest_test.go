package remote

import (
	"strings"
	"testing"

	"github.com/agent-runner/agent-runner/job"
)

func TestManifestCheck(t *testing.T) {
	sum := strings.Repeat("ab", 32)
	file := func(p string, size int64) File { return File{Path: p, Size: size, SHA256: sum} }
	commit := file("result.json", 10)
	man := func(files ...File) Manifest {
		return Manifest{Kind: "job", ID: "job_1", Attempt: 1, Files: append(files, commit)}
	}
	lim := Limits{MaxBytes: 1000, MaxFiles: 4}
	tests := []struct {
		name string
		m    Manifest
		want job.Code // "" for accepted
	}{
		{"record", man(file("stdout.txt", 5), file("artifacts/a/b.txt", 7)), ""},
		{"inline", man(File{Path: "stderr.txt", Size: 2, SHA256: sum, Inline: true, Data: []byte("hi")}), ""},
		{"empty inline", man(File{Path: "stderr.txt", SHA256: sum, Inline: true}), ""},
		{"climbs out", man(file("artifacts/../../etc/passwd", 1)), job.CodePathEscape},
		{"unclean", man(file("artifacts/./a", 1)), job.CodePathEscape},
		{"absolute", man(file("/etc/passwd", 1)), job.CodePathEscape},
		{"backslash", man(file(`artifacts\..\x`, 1)), job.CodePathEscape},
		{"control byte", man(file("artifacts/a\nb", 1)), job.CodePathEscape},
		{"not carried", man(file("snapshot/a", 1)), job.CodePathEscape},
		{"status not carried", man(file("status.json", 1)), job.CodePathEscape},
		{"under commit", man(file("result.json/x", 1)), job.CodePathEscape},
		{"dot", man(file(".", 1)), job.CodePathEscape},
		{"twice", man(file("stdout.txt", 1), file("stdout.txt", 1)), job.CodeInvalidRequest},
		{"file as directory", man(file("artifacts/a", 1), file("artifacts/a/b", 1)), job.CodeInvalidRequest},
		{"directory as file", man(file("artifacts/a/b", 1), file("artifacts/a", 1)), job.CodeInvalidRequest},
		{"too large", man(file("artifacts/a", 991)), job.CodeRecordTooLarge},
		{"negative size", man(file("artifacts/a", -1)), job.CodeRecordTooLarge},
		{"too many files", man(file("artifacts/a", 1), file("artifacts/b", 1), file("artifacts/c", 1), file("artifacts/d", 1)), job.CodeRecordTooLarge},
		{"bad hash", man(File{Path: "stdout.txt", Size: 1, SHA256: "xyz"}), job.CodeInvalidRequest},
		{"upper-case hash", man(File{Path: "stdout.txt", Size: 1, SHA256: strings.ToUpper(sum)}), job.CodeInvalidRequest},
		{"inline size", man(File{Path: "stdout.txt", Size: 3, SHA256: sum, Inline: true, Data: []byte("hi")}), job.CodeInvalidRequest},
		{"data without inline", man(File{Path: "stdout.txt", Size: 2, SHA256: sum, Data: []byte("hi")}), job.CodeInvalidRequest},
		{"no commit", Manifest{Kind: "job", ID: "job_1", Files: []File{file("stdout.txt", 1)}}, job.CodeInvalidRequest},
		{"commit not last", Manifest{Kind: "job", ID: "job_1", Files: []File{commit, file("stdout.txt", 1)}}, job.CodeInvalidRequest},
		{"bad id", Manifest{Kind: "job", ID: "../x", Files: []File{commit}}, job.CodeInvalidRequest},
		{"other kind", Manifest{Kind: "task", ID: "job_1", Files: []File{commit}}, job.CodeInvalidRequest},
		{"unresolved ref", Manifest{Kind: "job", ID: "job_1", Ref: true, Files: []File{commit}}, job.CodeInvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.m.check(Jobs, lim)
			if got := job.CodeOf(err); got != tt.want {
				t.Errorf("check(%s) = %v, want code %q", tt.name, err, tt.want)
			}
		})
	}
}
