package linuxsandbox

import (
	"testing"

	"github.com/elastic/go-seccomp-bpf/arch"
)

// Every syscall the native table knows is judged on purpose: allowed,
// allowed for some arguments, denied, or answered ENOSYS with a reason.
// A go-seccomp-bpf update that adds names fails here until each is
// placed.
func TestEverySyscallIsClassified(t *testing.T) {
	info, err := arch.GetInfo("")
	if err != nil {
		t.Skip(err)
	}
	where := map[string][]string{}
	add := func(list string, groups []syscallGroup) {
		for _, g := range groups {
			for _, n := range g.Names {
				where[n] = append(where[n], list)
			}
		}
	}
	add("allowed", allowedSyscalls)
	add("denied", deniedSyscalls)
	add("enosys", enosysSyscalls)
	for _, n := range argCheckedSyscalls {
		where[n] = append(where[n], "arguments")
	}
	for name := range info.SyscallNames {
		if got := where[name]; len(got) != 1 {
			t.Errorf("syscall %s is in %d lists %v, want exactly one", name, len(got), got)
		}
	}
	for name := range where {
		if _, ok := info.SyscallNames[name]; !ok {
			t.Errorf("syscall %s is listed but unknown on %s", name, info.Name)
		}
	}
}

func TestSeccompProgramAssembles(t *testing.T) {
	p, err := seccompProgram()
	if err != nil {
		t.Fatal(err)
	}
	if len(p) < 100 {
		t.Errorf("program has %d instructions, want the whole allow-list", len(p))
	}
}
