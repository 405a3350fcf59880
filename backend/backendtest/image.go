package backendtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
)

// The image tests run on a minimal Debian root file system that the test
// set-up builds with debootstrap from Debian's mirror (the one apt uses;
// nothing else is downloaded), once per machine and day, cached under
// $AGENT_RUNNER_TEST_IMAGES (default /var/tmp/agent-runner-test-images).
// python3 is included so the adversarial suite's attacks run inside.

// imageCacheDir is where built test images are kept.
func imageCacheDir() string {
	if d := os.Getenv("AGENT_RUNNER_TEST_IMAGES"); d != "" {
		return d
	}
	return "/var/tmp/agent-runner-test-images"
}

// DebianImage returns the cached Debian image, building it first if
// needed, or skips t with the reason it cannot be had here.
func DebianImage(t testing.TB) backend.Image {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("images need a root runner (a host id range per sandbox)")
	}
	dir := imageCacheDir()
	name := "bookworm-minbase-python3-" + time.Now().UTC().Format("20060102")
	root := filepath.Join(dir, name)
	if _, err := os.Stat(filepath.Join(root, "etc", "debian_version")); err != nil {
		buildDebian(t, dir, name)
	}
	return backend.Image{Ref: "debian:test", Digest: "sha256:" + name, RootFS: root,
		Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "IMAGE_ONLY=from-image", "SHARED=from-image"}}
}

// buildDebian runs debootstrap into dir/name, under a lock so that
// concurrent test binaries build it once.
func buildDebian(t testing.TB, dir, name string) {
	t.Helper()
	if _, err := exec.LookPath("debootstrap"); err != nil {
		t.Skip("debootstrap is not installed (scripts/test installs it): cannot build the test image")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, name)
	if _, err := os.Stat(filepath.Join(root, "etc", "debian_version")); err == nil {
		return
	}
	tmp := root + ".tmp"
	os.RemoveAll(tmp)
	t.Logf("building the test image with debootstrap into %s (once per day)", root)
	cmd := exec.Command("debootstrap", "--variant=minbase", "--include=python3", "bookworm", tmp, "http://deb.debian.org/debian")
	if out, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(tmp)
		t.Skipf("debootstrap cannot build the test image here: %v\n%s", err, tail(out))
	}
	if err := os.Rename(tmp, root); err != nil {
		t.Fatal(err)
	}
}

func tail(b []byte) []byte {
	if len(b) > 2000 {
		return b[len(b)-2000:]
	}
	return b
}

// Images resolves image references to the images it holds, as an image
// store would (runner.ImageResolver): for tests, over directories.
type Images map[string]backend.Image

// Resolve implements runner.ImageResolver; release does nothing.
func (m Images) Resolve(ref string) (backend.Image, func(), error) {
	img, ok := m[ref]
	if !ok {
		return backend.Image{}, nil, job.Errorf(job.CodeJobNotFound, "image %q is not in the store", ref).With("image", ref)
	}
	return img, func() {}, nil
}
