package guestvm

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Kernel is a bootable kernel image and its modules.
type Kernel struct {
	Image   string // /boot/vmlinuz-<release>
	Release string
	Modules string // /lib/modules/<release>
}

// FindKernel returns the newest kernel under boot (normally /boot) whose
// modules lie under modules (/lib/modules): Debian's linux-image-amd64.
func FindKernel(boot, modules string) (Kernel, error) {
	images, _ := filepath.Glob(filepath.Join(boot, "vmlinuz-*"))
	var found []Kernel
	for _, img := range images {
		rel := strings.TrimPrefix(filepath.Base(img), "vmlinuz-")
		dir := filepath.Join(modules, rel)
		if _, err := os.Stat(filepath.Join(dir, "modules.dep")); err == nil {
			found = append(found, Kernel{Image: img, Release: rel, Modules: dir})
		}
	}
	if len(found) == 0 {
		return Kernel{}, fmt.Errorf("no %s/vmlinuz-* with modules under %s (Debian: apt-get install linux-image-amd64)", boot, modules)
	}
	slices.SortFunc(found, func(a, b Kernel) int { return compareReleases(a.Release, b.Release) })
	return found[len(found)-1], nil
}

// compareReleases orders "6.1.0-9-amd64" before "6.1.0-10-amd64".
func compareReleases(a, b string) int {
	split := func(s string) []string {
		return strings.FieldsFunc(s, func(r rune) bool { return r == '.' || r == '-' || r == '+' })
	}
	x, y := split(a), split(b)
	for i := 0; i < len(x) && i < len(y); i++ {
		var m, n int
		_, errm := fmt.Sscanf(x[i], "%d", &m)
		_, errn := fmt.Sscanf(y[i], "%d", &n)
		switch {
		case errm == nil && errn == nil && m != n:
			return m - n
		case (errm != nil || errn != nil) && x[i] != y[i]:
			return strings.Compare(x[i], y[i])
		}
	}
	return len(x) - len(y)
}

// ModulePaths returns the files of the named modules and of every module
// they depend on, in an order in which each can be loaded (dependencies
// first), as paths relative to k.Modules. Modules built into the kernel
// (modules.builtin) need no file and are left out.
func (k Kernel) ModulePaths(names ...string) ([]string, error) {
	deps, err := readModulesDep(filepath.Join(k.Modules, "modules.dep"))
	if err != nil {
		return nil, err
	}
	builtin := map[string]bool{}
	if f, err := os.Open(filepath.Join(k.Modules, "modules.builtin")); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			builtin[moduleName(sc.Text())] = true
		}
		f.Close()
	}
	byName := map[string]string{}
	for file := range deps {
		byName[moduleName(file)] = file
	}
	var order []string
	seen := map[string]bool{}
	for _, n := range names {
		n = strings.ReplaceAll(n, "-", "_")
		if builtin[n] {
			continue
		}
		file, ok := byName[n]
		if !ok {
			return nil, fmt.Errorf("kernel %s has no module %s", k.Release, n)
		}
		// depmod lists every (transitive) dependency; modprobe loads
		// them from the last to the first.
		list := deps[file]
		for i := len(list) - 1; i >= 0; i-- {
			if !seen[list[i]] {
				seen[list[i]] = true
				order = append(order, list[i])
			}
		}
		if !seen[file] {
			seen[file] = true
			order = append(order, file)
		}
	}
	return order, nil
}

// readModulesDep reads "file: dep dep ..." lines.
func readModulesDep(path string) (map[string][]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string][]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		file, list, ok := strings.Cut(sc.Text(), ":")
		if ok {
			out[file] = strings.Fields(list)
		}
	}
	return out, sc.Err()
}

// moduleName is "virtio_pci" for "kernel/drivers/virtio/virtio_pci.ko.xz".
func moduleName(file string) string {
	base := filepath.Base(file)
	if i := strings.Index(base, ".ko"); i >= 0 {
		base = base[:i]
	}
	return strings.ReplaceAll(base, "-", "_")
}
