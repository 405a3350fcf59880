package image

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/compression"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/agent-runner/agent-runner/job"
)

func openStore(t *testing.T, cfg Config) *Store {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = filepath.Join(t.TempDir(), "images")
	}
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func importOne(t *testing.T, s *Store, src string, tags ...string) Info {
	t.Helper()
	infos, err := s.Import(context.Background(), src, ImportOptions{Tags: tags})
	if err != nil {
		t.Fatalf("Import(%s) = %v", src, err)
	}
	if len(infos) != 1 {
		t.Fatalf("Import(%s) imported %d images, want 1", src, len(infos))
	}
	return infos[0]
}

func rootfsOf(t *testing.T, s *Store, info Info) string {
	t.Helper()
	return s.rootfsPath(info.ChainID)
}

// listTree lists a directory tree: path, type and mode for each entry,
// symlink targets and file contents (short files).
func listTree(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, p)
		line := rel + " " + fi.Mode().String()
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			line += " -> " + target
		case fi.Mode().IsRegular() && fi.Size() < 64:
			b, _ := os.ReadFile(p)
			line += " " + string(b)
		}
		out = append(out, line)
		return nil
	})
	sort.Strings(out)
	return out
}

func TestImportHostRootfsRuns(t *testing.T) {
	s := openStore(t, Config{})
	ents := append(hostRootfs(t), ent{name: "tmp", typ: tar.TypeDir, mode: 0o1777}, dir("work"))
	// A second layer writes through bin -> usr/bin: it lands in usr/bin.
	img := testImage(t, layerTar(t, ents...), layerTar(t, file("bin/hello.txt", "hi from the image\n")))
	info := importOne(t, s, writeLayout(t, img, ""), "host:1")
	root := rootfsOf(t, s, info)
	if b, err := os.ReadFile(filepath.Join(root, "usr/bin/hello.txt")); err != nil || string(b) != "hi from the image\n" {
		t.Fatalf("usr/bin/hello.txt = %q, %v; want the second layer's file through bin -> usr/bin", b, err)
	}
	if fi, err := os.Lstat(filepath.Join(root, "tmp")); err != nil || fi.Mode()&os.ModeSticky == 0 || fi.Mode().Perm() != 0o777 {
		t.Errorf("tmp: %v, %v; want drwxrwxrwt", fi.Mode(), err)
	}
	want := ImageConfig{Env: []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8"}, Cmd: []string{"/bin/sh"}, WorkingDir: "/work", User: "root", Created: info.Config.Created, Architecture: goarch(), OS: "linux"}
	if diff := cmp.Diff(want, info.Config); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}
	if os.Geteuid() != 0 {
		t.Log("not root: the rootfs is not run in a chroot")
		return
	}
	cmd := exec.Command("/bin/sh", "-c", "cat /bin/hello.txt; ls /usr/bin/hello.txt")
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root}
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Log(strings.Join(listTree(t, root), "\n"))
	}
	if err != nil || string(out) != "hi from the image\n/usr/bin/hello.txt\n" {
		t.Fatalf("sh in the rootfs: %q, %v", out, err)
	}
}

func TestWhiteouts(t *testing.T) {
	s := openStore(t, Config{})
	lower := layerTar(t, dir("a"), file("a/x", "x"), file("a/y", "y"), dir("b"), file("b/old", "old"), dir("b/sub"), file("b/sub/deep", "d"), file("c", "c"))
	upper := layerTar(t, file("a/.wh.x", ""), dir("b"), file("b/new", "new"), file("b/.wh..wh..opq", ""), file(".wh.c", ""), file(".wh.nothing", ""))
	info := importOne(t, s, writeLayout(t, testImage(t, lower, upper), ""))
	got := listTree(t, rootfsOf(t, s, info))
	want := []string{". drwxr-xr-x", "a drwxr-xr-x", "a/y -rw-r--r-- y", "b drwxr-xr-x", "b/new -rw-r--r-- new"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rootfs after whiteouts (-want +got):\n%s", diff)
	}
}

// hostSum hashes a host file (or says it is absent).
func hostSum(p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		return "absent: " + err.Error()
	}
	sum := sha256.Sum256(b)
	return string(sum[:])
}

func TestHostileImages(t *testing.T) {
	scratch := t.TempDir()
	tests := []struct {
		name   string
		layers [][]ent
		code   job.Code
	}{
		{"dotdot", [][]ent{{file("../escaped", "x")}}, job.CodeImageUnsafeEntry},
		{"dotdot inside", [][]ent{{dir("a"), file("a/../../escaped", "x")}}, job.CodeImageUnsafeEntry},
		{"absolute name", [][]ent{{file("/etc/agent-runner-evil", "x")}}, job.CodeImageUnsafeEntry},
		{"hard link to /etc/passwd", [][]ent{{{name: "passwd", typ: tar.TypeLink, link: "/etc/passwd"}}}, job.CodeImageUnsafeEntry},
		{"hard link climbing out", [][]ent{{{name: "passwd", typ: tar.TypeLink, link: "../../../../etc/passwd"}}}, job.CodeImageUnsafeEntry},
		{"hard link to a missing file", [][]ent{{{name: "passwd", typ: tar.TypeLink, link: "etc/passwd"}}}, job.CodeImageUnsafeEntry},
		{"device node", [][]ent{{dir("dev"), {name: "dev/mem", typ: tar.TypeChar, mode: 0o666}}}, job.CodeImageUnsafeEntry},
		{"10 GB sparse file", [][]ent{{{name: "big", typ: tar.TypeReg, mode: 0o644, size: 10 << 30}}}, job.CodeImageTooLarge},
		{"whiteout of dotdot", [][]ent{{file("a/.wh...", "")}}, job.CodeImageUnsafeEntry},
	}
	before := map[string]string{}
	for _, p := range []string{"/etc/passwd", "/etc/shadow", "/etc/agent-runner-evil", filepath.Join(scratch, "escaped")} {
		before[p] = hostSum(p)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := openStore(t, Config{Dir: filepath.Join(scratch, "store", strings.ReplaceAll(tt.name, " ", "-"))})
			var layers [][]byte
			for _, l := range tt.layers {
				layers = append(layers, layerTar(t, l...))
			}
			_, err := s.Import(context.Background(), writeLayout(t, testImage(t, layers...), ""), ImportOptions{Tags: []string{"hostile:1"}})
			if got := job.CodeOf(err); got != tt.code {
				t.Fatalf("Import = %v; want code %s", err, tt.code)
			}
			// Nothing that looks finished, nothing half-done left.
			for _, d := range []string{"rootfs", "images", "tmp"} {
				if ents, _ := os.ReadDir(filepath.Join(s.Dir(), d)); len(ents) != 0 {
					t.Errorf("%s/ holds %d entries after a refused import", d, len(ents))
				}
			}
			if _, err := s.Inspect("hostile:1"); job.CodeOf(err) != job.CodeImageNotFound {
				t.Errorf("Inspect after a refused import = %v; want image.not_found", err)
			}
		})
	}
	for p, sum := range before {
		if hostSum(p) != sum {
			t.Errorf("host file %s changed", p)
		}
	}
}

func TestSymlinksNeverFollowedOut(t *testing.T) {
	if _, err := os.Stat("/etc/agent-runner-owned"); err == nil {
		t.Fatal("/etc/agent-runner-owned exists before the test")
	}
	shadow := hostSum("/etc/shadow")
	s := openStore(t, Config{})
	l1 := layerTar(t, dir("etc"), symlink("etc/shadow", "/etc/shadow"), symlink("evil", "/etc"), symlink("rel", "../../../../etc"))
	l2 := layerTar(t, file("etc/shadow", "root:image-only:::\n"), file("evil/agent-runner-owned", "in the image\n"), file("rel/agent-runner-rel", "also\n"))
	info := importOne(t, s, writeLayout(t, testImage(t, l1, l2), ""))
	root := rootfsOf(t, s, info)
	got := listTree(t, root)
	want := []string{
		". drwxr-xr-x",
		"etc drwxr-xr-x",
		"etc/agent-runner-owned -rw-r--r-- in the image\n",
		"etc/agent-runner-rel -rw-r--r-- also\n",
		"etc/shadow -rw-r--r-- root:image-only:::\n",
		"evil Lrwxrwxrwx -> /etc",
		"rel Lrwxrwxrwx -> ../../../../etc",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rootfs (-want +got):\n%s", diff)
	}
	if hostSum("/etc/shadow") != shadow {
		t.Error("the host's /etc/shadow changed")
	}
	for _, p := range []string{"/etc/agent-runner-owned", "/etc/agent-runner-rel"} {
		if _, err := os.Lstat(p); err == nil {
			os.Remove(p)
			t.Errorf("%s was written on the host", p)
		}
	}
}

func TestSetuidClearedAndOwnership(t *testing.T) {
	s := openStore(t, Config{})
	l := layerTar(t, ent{name: "su", typ: tar.TypeReg, mode: 0o4755, body: "x", uid: 1234}, ent{name: "sg", typ: tar.TypeDir, mode: 0o2775, uid: 70000}, ent{name: "ro", typ: tar.TypeDir, mode: 0o555}, file("ro/f", "f"))
	info := importOne(t, s, writeLayout(t, testImage(t, l), ""))
	root := rootfsOf(t, s, info)
	for p, want := range map[string]os.FileMode{"su": 0o755, "sg": os.ModeDir | 0o775, "ro": os.ModeDir | 0o555} {
		fi, err := os.Lstat(filepath.Join(root, p))
		if err != nil || fi.Mode() != want {
			t.Errorf("%s: mode %v, %v; want %v", p, fi.Mode(), err, want)
		}
	}
	if os.Geteuid() == 0 {
		for p, want := range map[string]uint32{"su": 1234, "sg": 65534} {
			fi, _ := os.Lstat(filepath.Join(root, p))
			if uid := fi.Sys().(*syscall.Stat_t).Uid; uid != want {
				t.Errorf("%s: uid %d; want %d", p, uid, want)
			}
		}
	}
}

func TestEntryCap(t *testing.T) {
	s := openStore(t, Config{MaxEntries: 3})
	_, err := s.Import(context.Background(), writeLayout(t, testImage(t, layerTar(t, file("a", ""), file("b", ""), file("c", ""), file("d", ""))), ""), ImportOptions{})
	if job.CodeOf(err) != job.CodeImageTooLarge {
		t.Fatalf("Import of 4 entries with MaxEntries 3 = %v; want image.too_large", err)
	}
	s = openStore(t, Config{MaxBytes: 10})
	_, err = s.Import(context.Background(), writeLayout(t, testImage(t, layerTar(t, file("a", "123456"), file("b", "123456"))), ""), ImportOptions{})
	if job.CodeOf(err) != job.CodeImageTooLarge {
		t.Fatalf("Import of 12 bytes with MaxBytes 10 = %v; want image.too_large", err)
	}
}

func TestCorruptBlobRefused(t *testing.T) {
	s := openStore(t, Config{})
	img := testImage(t, layerTar(t, file("a", "original")))
	dir := writeLayout(t, img, "")
	layers, _ := img.Layers()
	d, _ := layers[0].Digest()
	blob := filepath.Join(dir, "blobs", "sha256", d.Hex)
	other := testImage(t, layerTar(t, file("a", "tampered")))
	ol, _ := other.Layers()
	rc, _ := ol[0].Compressed()
	defer rc.Close()
	f, err := os.OpenFile(blob, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.ReadFrom(rc); err != nil {
		t.Fatal(err)
	}
	f.Close()
	_, err = s.Import(context.Background(), dir, ImportOptions{})
	if job.CodeOf(err) != job.CodeImageInvalid {
		t.Fatalf("Import of a tampered layer = %v; want image.invalid", err)
	}
	if ents, _ := os.ReadDir(filepath.Join(s.Dir(), "rootfs")); len(ents) != 0 {
		t.Errorf("rootfs/ holds %d entries after a refused import", len(ents))
	}
}

func TestImportFormatsAndIdempotence(t *testing.T) {
	s := openStore(t, Config{})
	img := testImage(t, layerTar(t, dir("etc"), file("etc/os-release", "ID=test\n")), layerTar(t, file("etc/motd", "hello\n")))
	layoutDir := writeLayout(t, img, "example.test/tool:1")
	first := importOne(t, s, layoutDir)
	digest, _ := img.Digest()
	if first.Digest != digest.String() || first.Source != "oci-layout" {
		t.Errorf("digest %s source %s; want %s oci-layout", first.Digest, first.Source, digest)
	}
	if diff := cmp.Diff([]string{"example.test/tool:1"}, first.Tags); diff != "" {
		t.Errorf("tags (-want +got):\n%s", diff)
	}
	// The same image again: the same record and rootfs; a new tag.
	again := importOne(t, s, tarDir(t, layoutDir), "tool:again")
	if again.Digest != first.Digest || again.ChainID != first.ChainID {
		t.Errorf("second import %s/%s; want %s/%s", again.Digest, again.ChainID, first.Digest, first.ChainID)
	}
	// docker save of the same image: its own digest, the same rootfs.
	docker := importOne(t, s, dockerSave(t, img, "docker.test/tool:latest"))
	if docker.Source != "docker-archive" || docker.ChainID != first.ChainID || docker.Digest == first.Digest {
		t.Errorf("docker import: %+v", docker)
	}
	if ents, _ := os.ReadDir(filepath.Join(s.Dir(), "rootfs")); len(ents) != 1 {
		t.Errorf("rootfs/ holds %d entries; want 1 (one chain)", len(ents))
	}
	list, err := s.List()
	if err != nil || len(list) != 2 {
		t.Fatalf("List = %d images, %v; want 2", len(list), err)
	}
	got, err := s.Inspect("tool:again")
	if err != nil || got.Digest != first.Digest || len(got.Layers) != 2 || got.Size == 0 {
		t.Fatalf("Inspect(tool:again) = %+v, %v", got, err)
	}
	if diff := cmp.Diff([]string{"example.test/tool:1", "tool:again"}, got.Tags); diff != "" {
		t.Errorf("tags (-want +got):\n%s", diff)
	}
	// A docker archive alone, into a fresh store, unpacks too.
	s2 := openStore(t, Config{})
	d2 := importOne(t, s2, dockerSave(t, img))
	if b, err := os.ReadFile(filepath.Join(rootfsOf(t, s2, d2), "etc/motd")); err != nil || string(b) != "hello\n" {
		t.Errorf("etc/motd from a docker archive = %q, %v", b, err)
	}
	if d2.Digest != docker.Digest {
		t.Errorf("docker archive digest %s in a fresh store; want %s (stable)", d2.Digest, docker.Digest)
	}
}

func TestRemoveGCAndLeases(t *testing.T) {
	s := openStore(t, Config{})
	info := importOne(t, s, writeLayout(t, testImage(t, layerTar(t, file("a", "a"))), ""), "leased:1")
	if _, _, err := s.Resolve("leased"); job.CodeOf(err) != job.CodeImageNotFound {
		t.Errorf("Resolve(leased) = %v; want image.not_found (leased:latest)", err)
	}
	img, release, err := s.Resolve(info.Digest)
	if err != nil || img.Digest != info.Digest || img.Ref != info.Digest {
		t.Fatalf("Resolve(digest) = %+v, %v", img, err)
	}
	if _, _, err := s.Resolve("leased:2"); job.CodeOf(err) != job.CodeImageNotFound {
		t.Errorf("Resolve(leased:2) = %v; want image.not_found", err)
	}
	img, release2, err := s.Resolve("leased:1")
	if err != nil {
		t.Fatal(err)
	}
	release()
	if img.RootFS != rootfsOf(t, s, info) || img.WorkingDir != "/work" || img.User != "root" || len(img.Env) != 2 {
		t.Errorf("Resolve = %+v", img)
	}
	if _, err := s.Remove("leased:1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Inspect("leased:1"); job.CodeOf(err) != job.CodeImageNotFound {
		t.Errorf("Inspect after Remove = %v; want image.not_found", err)
	}
	if _, err := s.GC(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(img.RootFS, "a")); err != nil {
		t.Fatalf("GC removed a leased rootfs: %v", err)
	}
	release2()
	removed, err := s.GC()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"rootfs/" + hexOf(info.ChainID)}, removed); diff != "" {
		t.Errorf("GC removed (-want +got):\n%s", diff)
	}
	if _, err := s.Remove("leased:1"); job.CodeOf(err) != job.CodeImageNotFound {
		t.Errorf("Remove of a removed tag = %v; want image.not_found", err)
	}
}

// TestCrashLeavesNothingFinished: an import cut off (a staging directory
// no process holds, a lease whose process is gone) is collected by the
// next GC, and nothing of it is listed.
func TestCrashLeavesNothingFinished(t *testing.T) {
	s := openStore(t, Config{})
	half := filepath.Join(s.Dir(), "tmp", "import-crashed", "rootfs", "etc")
	if err := os.MkdirAll(half, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Dir(half), 0o555)
	stale := filepath.Join(s.Dir(), "leases", "stale")
	os.WriteFile(stale, []byte("sha256:"+strings.Repeat("0", 64)+"\n"), 0o600)
	if list, err := s.List(); err != nil || len(list) != 0 {
		t.Fatalf("List = %v, %v; want nothing", list, err)
	}
	removed, err := s.GC()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"tmp/import-crashed"}, removed); diff != "" {
		t.Errorf("GC removed (-want +got):\n%s", diff)
	}
	if _, err := os.Lstat(stale); err == nil {
		t.Error("GC kept a lease no process holds")
	}
	// A live import's directory (held) is left alone.
	dir, done, err := s.staging("import-")
	if err != nil {
		t.Fatal(err)
	}
	if removed, _ := s.GC(); len(removed) != 0 {
		t.Errorf("GC removed %v while an import held it", removed)
	}
	done()
	if _, err := os.Lstat(dir); err == nil {
		t.Error("a finished import left its directory")
	}
}

// TestHostileLayoutArchive: an OCI layout archive holds files and
// directories only; a symlink or a climbing name in it is refused
// before the layout is read.
func TestHostileLayoutArchive(t *testing.T) {
	for _, tt := range []struct {
		name string
		e    ent
		code job.Code
	}{
		{"symlink", symlink("blobs/sha256/x", "/etc/shadow"), job.CodeImageInvalid},
		{"dotdot", file("../../escaped", "x"), job.CodeImageUnsafeEntry},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := openStore(t, Config{})
			p := filepath.Join(t.TempDir(), "layout.tar")
			os.WriteFile(p, layerTar(t, file("oci-layout", `{"imageLayoutVersion":"1.0.0"}`), file("index.json", `{"schemaVersion":2,"manifests":[]}`), tt.e), 0o644)
			if _, err := s.Import(context.Background(), p, ImportOptions{}); job.CodeOf(err) != tt.code {
				t.Fatalf("Import = %v; want %s", err, tt.code)
			}
			if ents, _ := os.ReadDir(filepath.Join(s.Dir(), "tmp")); len(ents) != 0 {
				t.Errorf("tmp/ holds %d entries after a refused import", len(ents))
			}
		})
	}
}

// TestZstdLayer: a zstd-compressed layer is recognised and checked like
// a gzip one.
func TestZstdLayer(t *testing.T) {
	s := openStore(t, Config{})
	raw := layerTar(t, file("z", "zstd\n"))
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(raw)), nil }, tarball.WithCompression(compression.ZStd), tarball.WithMediaType(types.OCILayerZStd))
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		t.Fatal(err)
	}
	info := importOne(t, s, writeLayout(t, img, ""))
	if b, err := os.ReadFile(filepath.Join(rootfsOf(t, s, info), "z")); err != nil || string(b) != "zstd\n" {
		t.Fatalf("z = %q, %v", b, err)
	}
	if mt := info.Layers[0].MediaType; !strings.Contains(mt, "zstd") {
		t.Errorf("media type %q; want a zstd one", mt)
	}
}

// TestBombBehindTheTar: bytes after the tar's end (which the diff id
// covers, so they are read) count against the store's cap.
func TestBombBehindTheTar(t *testing.T) {
	s := openStore(t, Config{MaxBytes: 1 << 20, MaxEntries: 10})
	raw := append(layerTar(t, file("a", "a")), make([]byte, 32<<20)...)
	_, err := s.Import(context.Background(), writeLayout(t, testImage(t, raw), ""), ImportOptions{})
	if job.CodeOf(err) != job.CodeImageTooLarge {
		t.Fatalf("Import of a layer with 32 MiB behind its tar = %v; want image.too_large", err)
	}
}

// TestWithoutOpenat2: where RESOLVE_IN_ROOT is missing, no symlink on an
// entry's path is followed: such an entry is refused, nothing written.
func TestWithoutOpenat2(t *testing.T) {
	noResolveInRoot = true
	defer func() { noResolveInRoot = false }()
	s := openStore(t, Config{})
	_, err := s.Import(context.Background(), writeLayout(t, testImage(t, layerTar(t, symlink("evil", "/etc"), file("evil/agent-runner-owned", "x"))), ""), ImportOptions{})
	if job.CodeOf(err) != job.CodeImageUnsafeEntry {
		t.Fatalf("Import = %v; want image.unsafe_entry", err)
	}
	if _, err := os.Lstat("/etc/agent-runner-owned"); err == nil {
		os.Remove("/etc/agent-runner-owned")
		t.Fatal("/etc/agent-runner-owned was written on the host")
	}
	// Plain images unpack as before.
	info := importOne(t, s, writeLayout(t, testImage(t, layerTar(t, dir("etc"), file("etc/a", "a"), symlink("etc/b", "/etc/a"))), ""))
	if target, err := os.Readlink(filepath.Join(rootfsOf(t, s, info), "etc/b")); err != nil || target != "/etc/a" {
		t.Errorf("etc/b -> %q, %v", target, err)
	}
}
