package backend

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// openTerminal gives s a new pseudo-terminal of e.Terminal's size on
// the devpts at pts: the slave (owned by owner unless -1) is the
// process's stdin, stdout and stderr, the master is copied from (to
// e.Stdout) and into (from e.Stdin).
func (s *Stdio) openTerminal(e Exec, pts string, owner int) (err error) {
	m, err := os.OpenFile(filepath.Join(pts, "ptmx"), os.O_RDWR|unix.O_NOCTTY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			m.Close()
		}
	}()
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		return err
	}
	n, err := unix.IoctlGetUint32(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		return err
	}
	slave, err := os.OpenFile(filepath.Join(pts, strconv.FormatUint(uint64(n), 10)), os.O_RDWR|unix.O_NOCTTY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	s.child = append(s.child, slave)
	if owner >= 0 {
		if err := slave.Chown(owner, owner); err != nil {
			return err
		}
	}
	s.In, s.Out, s.Err = slave, slave, slave
	cols, rows := e.Terminal.Cols, e.Terminal.Rows
	if cols == 0 || rows == 0 {
		cols, rows = 80, 24
	}
	if err := setSize(m, cols, rows); err != nil {
		return err
	}
	// The master's reads end (EIO) once every holder of the slave is
	// gone; its copy is counted like a pipe's.
	s.master = m
	s.copyOut(m, e.Stdout)
	if e.Stdin != nil {
		go func() {
			buf := make([]byte, 4<<10)
			for {
				n, err := e.Stdin.Read(buf)
				if n > 0 {
					if _, werr := m.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}()
	}
	return nil
}

func setSize(f *os.File, cols, rows uint16) error {
	return unix.IoctlSetWinsize(int(f.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Col: cols, Row: rows})
}

// TerminalEnv is env with TERM=term added when term is set and env has
// no TERM of its own.
func TerminalEnv(env []string, t *Terminal) []string {
	if t == nil || t.Term == "" {
		return env
	}
	for _, kv := range env {
		if strings.HasPrefix(kv, "TERM=") {
			return env
		}
	}
	return append(env[:len(env):len(env)], "TERM="+t.Term)
}
