package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agent-runner/agent-runner/image"
	"github.com/agent-runner/agent-runner/image/imagetest"
	"github.com/agent-runner/agent-runner/job"
)

// TestImageCLI: import a docker save archive, list, inspect, refuse a
// hostile name, remove, as an operator types them.
func TestImageCLI(t *testing.T) {
	store := t.TempDir()
	archive := imagetest.DockerArchive(t, map[string]string{"etc/motd": "hello\n"}, "tool:1")
	out, errOut, code := cli(t, "", "image", "import", archive, "--tag", "cli:test", "--store-dir", store)
	if code != 0 {
		t.Fatalf("image import: exit %d: %s", code, errOut)
	}
	var imported []image.Info
	if err := json.Unmarshal([]byte(out), &imported); err != nil || len(imported) != 1 {
		t.Fatalf("image import printed %q: %v", out, err)
	}
	digest := imported[0].Digest
	out, errOut, code = cli(t, "", "image", "ls", "--store-dir", store)
	if code != 0 || !strings.Contains(out, "cli:test") || !strings.Contains(out, digest[:19]) {
		t.Fatalf("image ls: exit %d: %q %s", code, out, errOut)
	}
	out, _, code = cli(t, "", "image", "inspect", "cli:test", "--store-dir", store)
	var info image.Info
	if code != 0 || json.Unmarshal([]byte(out), &info) != nil || info.Digest != digest || info.Config.Cmd[0] != "/bin/sh" {
		t.Fatalf("image inspect: exit %d: %q", code, out)
	}
	// --images-dir names the store directly.
	if _, errOut, code := cli(t, "", "image", "inspect", digest, "--images-dir", filepath.Join(store, "images")); code != 0 {
		t.Fatalf("image inspect --images-dir: exit %d: %s", code, errOut)
	}
	_, errOut, code = cli(t, "", "image", "inspect", "absent:1", "--store-dir", store)
	if code != exitInvalid || !strings.Contains(errOut, string(job.CodeImageNotFound)) {
		t.Errorf("image inspect absent: exit %d: %s", code, errOut)
	}
	if _, errOut, code := cli(t, "", "image", "rm", "cli:test", "--store-dir", store); code != 0 {
		t.Fatalf("image rm: exit %d: %s", code, errOut)
	}
	out, _, _ = cli(t, "", "image", "ls", "--json", "--store-dir", store)
	if strings.TrimSpace(out) != "[]" {
		t.Errorf("image ls after rm = %q; want []", out)
	}
}

// TestServeImages: serve mounts /v1/images with scope admin and takes an
// archive as a raw body; a read token is refused, an admin token imports,
// and the CLI on the same store sees the image.
func TestServeImages(t *testing.T) {
	addr := freeAddr(t)
	store := t.TempDir()
	startGuardedServe(t, addr, map[string]string{"admin-token": "admin", "read-token": "read"}, "--store-dir", store)
	archive, err := os.ReadFile(imagetest.DockerArchive(t, map[string]string{"etc/motd": "hi\n"}))
	if err != nil {
		t.Fatal(err)
	}
	post := func(token string) *http.Response {
		req, _ := http.NewRequest("POST", "http://"+addr+"/v1/images?tag=served:1", bytes.NewReader(archive))
		req.Header.Set("Content-Type", "application/octet-stream")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if resp := post("read-token"); resp.StatusCode != http.StatusForbidden {
		t.Errorf("POST /v1/images with a read token = %d; want 403", resp.StatusCode)
	}
	if resp := post("admin-token"); resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /v1/images with an admin token = %d; want 201", resp.StatusCode)
	}
	out, errOut, code := cli(t, "", "image", "inspect", "served:1", "--store-dir", store)
	if code != 0 || !strings.Contains(out, `"served:1"`) {
		t.Fatalf("image inspect of the served import: exit %d: %s %s", code, out, errOut)
	}
}
