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

// Result is what the guest did.
type Result struct {
	// Output is everything the guest wrote to its serial console
	// (kernel messages, the commands' stdout and stderr, the markers).
	Output []byte
	// Runs are the commands that ran, in order.
	Runs []Run
	// Elapsed is the whole boot, from QEMU's start to its exit.
	Elapsed time.Duration
}

// Run is one command's part of the console and its exit code.
type Run struct {
	Name     string
	Output   string
	ExitCode int
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
// QEMU fails or the guest reported no command; a command that failed in
// the guest is a Run with its exit code.
func (m Machine) Run(ctx context.Context) (Result, error) {
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, m.QEMU, m.Args()...)
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	res := Result{Output: out.Bytes(), Elapsed: time.Since(start)}
	res.Runs = ParseRuns(res.Output)
	if len(res.Runs) == 0 {
		if err == nil {
			err = fmt.Errorf("the guest powered off without reporting a command (%s)", ExitMarker)
		}
		return res, fmt.Errorf("qemu: %w", err)
	}
	return res, nil
}

// ParseRuns splits console output into the commands framed by RunMarker
// and ExitMarker lines. A command cut off before its ExitMarker is left
// out; a setup failure is a Run named "setup".
func ParseRuns(output []byte) []Run {
	var runs []Run
	var cur *Run
	var body strings.Builder
	for _, line := range strings.Split(strings.ReplaceAll(string(output), "\r", ""), "\n") {
		if name, ok := strings.CutPrefix(line, RunMarker+" "); ok {
			cur = &Run{Name: strings.TrimSpace(name)}
			body.Reset()
			continue
		}
		if rest, ok := strings.CutPrefix(line, ExitMarker+" "); ok {
			code, err := strconv.Atoi(strings.TrimSpace(rest))
			if err != nil {
				continue
			}
			r := Run{Name: "setup", Output: body.String(), ExitCode: code}
			if cur != nil {
				r.Name = cur.Name
			}
			runs = append(runs, r)
			cur = nil
			body.Reset()
			continue
		}
		body.WriteString(line + "\n")
	}
	return runs
}
