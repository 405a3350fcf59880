package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// makeRaw puts the terminal f in raw mode (no echo, no line editing, no
// signals from keys: Ctrl-C is the byte 0x03) and returns the function
// that restores its mode as it was. A file that is no terminal is left
// as it is (restore does nothing).
func makeRaw(f *os.File) (restore func()) {
	fd := int(f.Fd())
	old, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return func() {}
	}
	raw := *old
	raw.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
	raw.Oflag &^= unix.OPOST
	raw.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	raw.Cflag &^= unix.CSIZE | unix.PARENB
	raw.Cflag |= unix.CS8
	raw.Cc[unix.VMIN], raw.Cc[unix.VTIME] = 1, 0
	_ = unix.IoctlSetTermios(fd, unix.TCSETS, &raw)
	return func() { _ = unix.IoctlSetTermios(fd, unix.TCSETS, old) }
}

// terminalSize is f's size in characters (0, 0 when f is no terminal).
func terminalSize(f *os.File) (cols, rows uint16) {
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil {
		return 0, 0
	}
	return ws.Col, ws.Row
}
