// Package imagetest builds small images for the tests of the image
// store's doors and the acceptance scripts, offline and with the
// standard library only: a docker save archive of one layer.
package imagetest

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// DockerArchive writes a docker save archive (WriteDockerArchive) in a
// temporary directory of t and returns its path.
func DockerArchive(t testing.TB, files map[string]string, tags ...string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "image.tar")
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := WriteDockerArchive(f, files, tags...); err != nil {
		t.Fatal(err)
	}
	return out
}

// entry is the layer entry of name: content "->TARGET" is a symlink to
// TARGET, "@HOSTFILE" a copy of that host file, executable (to put
// real programs, such as a static busybox, in a test image), anything
// else a regular file of that content.
func entry(name, content string) (*tar.Header, []byte, error) {
	switch {
	case strings.HasPrefix(content, "->"):
		return &tar.Header{Name: name, Typeflag: tar.TypeSymlink, Linkname: content[2:], Mode: 0o777}, nil, nil
	case strings.HasPrefix(content, "@"):
		body, err := os.ReadFile(content[1:])
		if err != nil {
			return nil, nil, err
		}
		return &tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(body))}, body, nil
	}
	return &tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(content))}, []byte(content), nil
}

// WriteDockerArchive writes a docker save archive (the layout before
// Docker 25: manifest.json, <config hex>.json, <dir>/layer.tar) of one
// image with one layer holding files (path: content, see entry), tagged
// tags. The
// names are written as given, hostile ones included.
func WriteDockerArchive(w io.Writer, files map[string]string, tags ...string) error {
	var layer bytes.Buffer
	lw := tar.NewWriter(&layer)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		hdr, body, err := entry(n, files[n])
		if err != nil {
			return err
		}
		if err := lw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := lw.Write(body); err != nil {
			return err
		}
	}
	if err := lw.Close(); err != nil {
		return err
	}
	diff := sha256.Sum256(layer.Bytes())
	config, _ := json.Marshal(map[string]any{
		"architecture": "amd64", "os": "linux",
		"config": map[string]any{"Env": []string{"PATH=/usr/bin:/bin"}, "Cmd": []string{"/bin/sh"}, "WorkingDir": "/"},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + hex.EncodeToString(diff[:])}},
	})
	sum := sha256.Sum256(config)
	configName := hex.EncodeToString(sum[:]) + ".json"
	layerName := hex.EncodeToString(diff[:]) + "/layer.tar"
	if tags == nil {
		tags = []string{}
	}
	manifest, _ := json.Marshal([]map[string]any{{"Config": configName, "RepoTags": tags, "Layers": []string{layerName}}})
	tw := tar.NewWriter(w)
	for _, e := range []struct {
		name string
		body []byte
	}{{configName, config}, {layerName, layer.Bytes()}, {"manifest.json", manifest}} {
		if err := tw.WriteHeader(&tar.Header{Name: e.name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(e.body))}); err != nil {
			return err
		}
		if _, err := tw.Write(e.body); err != nil {
			return err
		}
	}
	return tw.Close()
}
