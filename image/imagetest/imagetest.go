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

// WriteDockerArchive writes a docker save archive (the layout before
// Docker 25: manifest.json, <config hex>.json, <dir>/layer.tar) of one
// image with one layer holding files (path: content), tagged tags. The
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
		if err := lw.WriteHeader(&tar.Header{Name: n, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(files[n]))}); err != nil {
			return err
		}
		if _, err := lw.Write([]byte(files[n])); err != nil {
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
