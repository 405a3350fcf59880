package image

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// The tests build every image they import here, offline: layers are
// tars written in memory, assembled into OCI layouts with
// go-containerregistry, or into docker save archives by hand.

// ent is one tar entry of a test layer.
type ent struct {
	name string
	typ  byte
	body string
	mode int64
	link string
	// size, when set, is the declared size, with no body written after
	// the header (a sparse file's claim): the tar ends there.
	size int64
	uid  int
	// host, when set, is a host file whose bytes are the body.
	host string
}

func file(name, body string) ent { return ent{name: name, typ: tar.TypeReg, body: body, mode: 0o644} }
func dir(name string) ent        { return ent{name: name, typ: tar.TypeDir, mode: 0o755} }
func symlink(name, target string) ent {
	return ent{name: name, typ: tar.TypeSymlink, link: target, mode: 0o777}
}

// layerTar writes ents as a tar.
func layerTar(t *testing.T, ents ...ent) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range ents {
		body := []byte(e.body)
		if e.host != "" {
			b, err := os.ReadFile(e.host)
			if err != nil {
				t.Fatal(err)
			}
			body = b
		}
		hdr := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: e.mode, Linkname: e.link, Uid: e.uid, Gid: e.uid, ModTime: time.Unix(1700000000, 0), Format: tar.FormatPAX}
		if e.typ == tar.TypeReg {
			hdr.Size = int64(len(body))
		}
		if e.typ == tar.TypeChar {
			hdr.Devmajor, hdr.Devminor = 1, 3
		}
		if e.size > 0 {
			hdr.Size = e.size
			if err := tw.WriteHeader(hdr); err != nil {
				t.Fatal(err)
			}
			// The header only: the tar writer would insist on the body.
			return buf.Bytes()
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// testImage assembles layers (each a tar) into a v1.Image with a config.
func testImage(t *testing.T, layers ...[]byte) v1.Image {
	t.Helper()
	img := empty.Image
	for _, l := range layers {
		b := l
		layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
		if err != nil {
			t.Fatal(err)
		}
		if img, err = mutate.AppendLayers(img, layer); err != nil {
			t.Fatal(err)
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", goarch()
	cf.Created = v1.Time{Time: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)}
	cf.Config = v1.Config{Env: []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8"}, Cmd: []string{"/bin/sh"}, WorkingDir: "/work", User: "root"}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	return img
}

// writeLayout writes img as an OCI layout directory, tagged ref in its
// index (io.containerd.image.name) when ref is set.
func writeLayout(t *testing.T, img v1.Image, ref string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "layout")
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	var opts []layout.Option
	if ref != "" {
		opts = append(opts, layout.WithAnnotations(map[string]string{"io.containerd.image.name": ref, "org.opencontainers.image.ref.name": "latest"}))
	}
	if err := p.AppendImage(img, opts...); err != nil {
		t.Fatal(err)
	}
	return dir
}

// tarDir writes the directory dir as a tar archive file.
func tarDir(t *testing.T, dir string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "layout.tar")
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	if err := tw.AddFS(os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return out
}

// dockerSave writes img as `docker save` (before Docker 25) lays it out:
// manifest.json, <config hex>.json, <dir>/layer.tar per layer.
func dockerSave(t *testing.T, img v1.Image, tags ...string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "image.tar")
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	add := func(name string, b []byte) {
		if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(b))}); err != nil {
			t.Fatal(err)
		}
		tw.Write(b)
	}
	cfg, err := img.RawConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(cfg)
	cfgName := hex.EncodeToString(sum[:]) + ".json"
	add(cfgName, cfg)
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for i, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(rc)
		rc.Close()
		name := strings.Repeat(string(rune('a'+i)), 64) + "/layer.tar"
		add(name, b)
		names = append(names, name)
	}
	m, _ := json.Marshal([]map[string]any{{"Config": cfgName, "RepoTags": tags, "Layers": names}})
	add("manifest.json", m)
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return out
}

// hostRootfs is a small real root file system taken from the host: sh,
// ls and cat with the libraries their ELF headers name and the
// interpreter, laid out merged-/usr (bin, lib, lib64 are symlinks into
// usr), each file at its real path below usr.
func hostRootfs(t *testing.T) []ent {
	t.Helper()
	ents := []ent{symlink("bin", "usr/bin"), symlink("lib", "usr/lib"), symlink("lib64", "usr/lib64")}
	seen := map[string]bool{}
	dirs := map[string]bool{}
	var addFile func(p string)
	addFile = func(p string) {
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			t.Skipf("host file %s: %v", p, err)
		}
		rel := usrRel(real)
		if alias := usrRel(p); alias != rel && !seen[alias] {
			// The name it was asked by (/bin/sh, the ELF interpreter's
			// /lib64/...) is a symlink to it, as on the host.
			seen[alias] = true
			for d := filepath.Dir(alias); d != "."; d = filepath.Dir(d) {
				dirs[d] = true
			}
			ents = append(ents, symlink(alias, real))
		}
		if seen[rel] {
			return
		}
		seen[rel] = true
		for d := filepath.Dir(rel); d != "."; d = filepath.Dir(d) {
			dirs[d] = true
		}
		ents = append(ents, ent{name: rel, typ: tar.TypeReg, mode: 0o755, host: real})
		f, err := elf.Open(real)
		if err != nil {
			return
		}
		defer f.Close()
		for _, prog := range f.Progs {
			if prog.Type == elf.PT_INTERP {
				b := make([]byte, prog.Filesz)
				prog.ReadAt(b, 0)
				addFile(strings.TrimRight(string(b), "\x00"))
			}
		}
		libs, _ := f.ImportedLibraries()
		for _, lib := range libs {
			for _, d := range []string{"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/lib64", "/usr/lib64", "/lib"} {
				if _, err := os.Stat(filepath.Join(d, lib)); err == nil {
					addFile(filepath.Join(d, lib))
					break
				}
			}
		}
	}
	for _, b := range []string{"/bin/sh", "/bin/ls", "/bin/cat"} {
		addFile(b)
	}
	var ds []string
	for d := range dirs {
		ds = append(ds, d)
	}
	sort.Strings(ds)
	var out []ent
	for _, d := range ds {
		out = append(out, dir(d))
	}
	return append(out, ents...)
}

// usrRel is p's path in a merged-/usr image: below usr/.
func usrRel(p string) string {
	rel := strings.TrimPrefix(p, "/")
	if !strings.HasPrefix(rel, "usr/") {
		rel = "usr/" + rel
	}
	return rel
}

func goarch() string { return runtime.GOARCH }
