// Package imagetest builds small images for the tests of the image
// store's doors, offline and with the standard library only: a docker
// save archive of one layer.
package imagetest

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"testing"
)

// DockerArchive writes a docker save archive (the layout before Docker
// 25: manifest.json, <config hex>.json, <dir>/layer.tar) of one image
// with one layer holding files (path: content), tagged tags, and
// returns its path.
func DockerArchive(t testing.TB, files map[string]string, tags ...string) string {
	t.Helper()
	var layer bytes.Buffer
	lw := tar.NewWriter(&layer)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := lw.WriteHeader(&tar.Header{Name: n, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(files[n]))}); err != nil {
			t.Fatal(err)
		}
		lw.Write([]byte(files[n]))
	}
	if err := lw.Close(); err != nil {
		t.Fatal(err)
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
	out := filepath.Join(t.TempDir(), "image.tar")
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	for _, e := range []struct {
		name string
		body []byte
	}{{configName, config}, {layerName, layer.Bytes()}, {"manifest.json", manifest}} {
		if err := tw.WriteHeader(&tar.Header{Name: e.name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(e.body))}); err != nil {
			t.Fatal(err)
		}
		tw.Write(e.body)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return out
}
