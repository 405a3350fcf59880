package guestvm

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// Machine is one QEMU boot of a kernel and an initramfs under TCG
// (software emulation: KVM guests do not boot on the project's hosts).
type Machine struct {
	QEMU     string // qemu-system-x86_64
	Kernel   string // the kernel image
	Initrd   string // from Image.WriteInitramfs
	MemoryMB int
	CPUs     int
	Shares   []Share
	// Append is added to the kernel command line.
	Append string
}

// Share exports a host directory to the guest over 9p (virtio).
type Share struct {
	Tag      string
	HostDir  string
	ReadOnly bool
}

// Result is how the guest's command ended.
type Result struct {
	// Output is everything the guest wrote to its serial console
	// (kernel messages, the command's stdout and stderr, the marker).
	Output []byte
	// ExitCode is the command's, from the marker line.
	ExitCode int
	// Elapsed is the whole boot, from QEMU's start to its exit.
	Elapsed time.Duration
}

// Args are QEMU's arguments: a q35 machine with a serial console on
// stdio and no network, that exits instead of rebooting.
func (m Machine) Args() []string {
	cmdline := "console=ttyS0 systemd.unified_cgroup_hierarchy=1 quiet panic=-1"
	if m.Append != "" {
		cmdline += " " + m.Append
	}
	args := []string{
		"-machine", "q35", "-accel", "tcg", "-cpu", "max",
		"-m", strconv.Itoa(m.MemoryMB), "-smp", strconv.Itoa(m.CPUs),
		"-nographic", "-no-reboot", "-nic", "none",
		"-kernel", m.Kernel, "-initrd", m.Initrd, "-append", cmdline,
	}
	for _, s := range m.Shares {
		opt := fmt.Sprintf("local,path=%s,mount_tag=%s,security_model=none,multidevs=remap", s.HostDir, s.Tag)
		if s.ReadOnly {
			opt += ",readonly=on"
		}
		args = append(args, "-virtfs", opt)
	}
	return args
}

// Run boots the machine and waits for it to power off. It fails when
// QEMU fails or the guest never printed its exit marker; a command that
// failed in the guest is a Result with its exit code.
func (m Machine) Run(ctx context.Context) (Result, error) {
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, m.QEMU, m.Args()...)
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	res := Result{Output: out.Bytes(), Elapsed: time.Since(start)}
	code, ok := ParseExit(res.Output)
	if !ok {
		if err == nil {
			err = fmt.Errorf("the guest powered off without printing %s", ExitMarker)
		}
		return res, fmt.Errorf("qemu: %w", err)
	}
	res.ExitCode = code
	return res, nil
}

// ParseExit finds the last marker line in the console output.
func ParseExit(output []byte) (int, bool) {
	lines := strings.Split(strings.ReplaceAll(string(output), "\r", ""), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		rest, ok := strings.CutPrefix(lines[i], ExitMarker+" ")
		if !ok {
			continue
		}
		code, err := strconv.Atoi(strings.TrimSpace(rest))
		if err == nil {
			return code, true
		}
	}
	return 0, false
}
