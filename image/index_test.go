package image

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// TestIndexPicksThisPlatform: of a multi-platform index (nested, as
// registries serve it), only this host's image is imported.
func TestIndexPicksThisPlatform(t *testing.T) {
	mine := testImage(t, layerTar(t, file("arch", "mine")))
	other := testImage(t, layerTar(t, file("arch", "other")))
	otherArch := "arm64"
	if goarch() == "arm64" {
		otherArch = "amd64"
	}
	inner := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: other, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: otherArch}}},
		mutate.IndexAddendum{Add: mine, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: goarch()}}})
	dir := filepath.Join(t.TempDir(), "layout")
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendIndex(inner, layout.WithAnnotations(map[string]string{"io.containerd.image.name": "multi:1"})); err != nil {
		t.Fatal(err)
	}
	s := openStore(t, Config{})
	info := importOne(t, s, dir)
	want, _ := mine.Digest()
	if info.Digest != want.String() {
		t.Errorf("imported %s; want this platform's %s", info.Digest, want)
	}
	if diff := cmp.Diff([]string{"multi:1"}, info.Tags); diff != "" {
		t.Errorf("tags (-want +got):\n%s", diff)
	}
}

// TestConcurrentImportsAndMovedTags: two imports of one image at once
// end with one rootfs; a tag imported onto another image moves, and the
// first image stays, untagged, until removed by digest.
func TestConcurrentImportsAndMovedTags(t *testing.T) {
	s := openStore(t, Config{})
	first := writeLayout(t, testImage(t, layerTar(t, file("v", "1"))), "")
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = s.Import(context.Background(), first, ImportOptions{Tags: []string{"moving:1"}})
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if ents, _ := os.ReadDir(filepath.Join(s.Dir(), "rootfs")); len(ents) != 1 {
		t.Errorf("rootfs/ holds %d entries; want 1", len(ents))
	}
	old, err := s.Inspect("moving:1")
	if err != nil {
		t.Fatal(err)
	}
	next := importOne(t, s, writeLayout(t, testImage(t, layerTar(t, file("v", "2"))), ""), "moving:1")
	if got, _ := s.Inspect("moving:1"); got.Digest != next.Digest {
		t.Errorf("moving:1 names %s; want the second image %s", got.Digest, next.Digest)
	}
	kept, err := s.Inspect(old.Digest)
	if err != nil || len(kept.Tags) != 0 {
		t.Fatalf("the first image after its tag moved: %+v, %v; want it kept, untagged", kept, err)
	}
	if _, err := s.Remove(old.Digest); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(filepath.Join(s.Dir(), "rootfs")); len(ents) != 1 {
		t.Errorf("rootfs/ holds %d entries after removing the first image; want 1", len(ents))
	}
}
