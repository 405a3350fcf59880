package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
)

func TestApplyConfig(t *testing.T) {
	newFlags := func() *pflag.FlagSet {
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		fs.StringArray("egress-allow", nil, "")
		fs.String("store-dir", "default", "")
		fs.Int("workers", 2, "")
		fs.Bool("durable", false, "")
		return fs
	}
	fs := newFlags()
	fs.Parse([]string{"--workers", "7"})
	doc := "egress-allow: [api.anthropic.com, \"*.npmjs.org\"]\nstore-dir: /var/lib/ar\nworkers: 3\ndurable: true\n"
	if err := applyConfig(fs, []byte(doc), "c.yaml"); err != nil {
		t.Fatal(err)
	}
	allow, _ := fs.GetStringArray("egress-allow")
	store, _ := fs.GetString("store-dir")
	workers, _ := fs.GetInt("workers")
	durable, _ := fs.GetBool("durable")
	if !cmp.Equal(allow, []string{"api.anthropic.com", "*.npmjs.org"}) || store != "/var/lib/ar" || workers != 7 || !durable {
		t.Errorf("after the config: allow %q store %q workers %d (the command line's 7 wins) durable %v", allow, store, workers, durable)
	}
	for _, tt := range []struct{ doc, want string }{
		{"egress-alow: [x]\n", `"egress-alow" is not a flag`},
		{"store-dir: [a, b]\n", "takes one value"},
		{"workers: many\n", "workers"},
		{"- a\n", "not a YAML map"},
	} {
		if err := applyConfig(newFlags(), []byte(tt.doc), "c.yaml"); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("applyConfig(%q) = %v, want an error with %q", tt.doc, err, tt.want)
		}
	}
}

// Through the binary: the file's sandbox view and egress ceiling apply to
// run exactly as the flags would.
func TestConfigFileThroughTheCLI(t *testing.T) {
	sandboxUsable(t)
	extra := sandboxTempDir(t)
	os.WriteFile(filepath.Join(extra, "tool.txt"), []byte("seen through the config file"), 0o644)
	cfg := filepath.Join(t.TempDir(), "agent-runner.yaml")
	os.WriteFile(cfg, []byte("sandbox-ro: ["+extra+"]\n"), 0o644)
	store := sandboxTempDir(t)
	body := sandboxRequest(t, `["/bin/cat","`+filepath.Join(extra, "tool.txt")+`"]`, `["cat"]`, "")
	out, stderr, code := cli(t, "", "run", "--config", cfg, "--store-dir", store, "--request", requestFile(t, body))
	if code != 0 || !strings.Contains(out, "seen through the config file") {
		t.Errorf("run --config = %d %s %s", code, out, stderr)
	}
	os.WriteFile(cfg, []byte("sandbox-r0: [/x]\n"), 0o644)
	if _, stderr, code := cli(t, "", "run", "--config", cfg, "--request", requestFile(t, body)); code != exitInvalid || !strings.Contains(stderr, "sandbox-r0") {
		t.Errorf("a typo in the config = %d %s, want a usage error naming it", code, stderr)
	}
}
