package oci

import "encoding/binary"

// The sandbox's init (pid 1 of its pid namespace) is this program: a
// static amd64 ELF of 180 bytes that waits for any child (orphans of
// the execs are reparented to it) and, when it has none, sleeps a
// second and waits again. It needs nothing from the image, cannot be
// signalled from inside (pid 1 ignores signals it has no handler for)
// and dies with the sandbox (`kill KILL` from the runtime).
//
//	loop: wait4(-1, NULL, 0, NULL)        48 c7 c7 ff ff ff ff  31 f6  31 d2  45 31 d2
//	                                      b8 3d 00 00 00  0f 05
//	      if rax >= 0 goto loop           48 85 c0  79 e6
//	      nanosleep(&ts, NULL)            48 8d 3d 0b 00 00 00  31 f6  b8 23 00 00 00  0f 05
//	      goto loop                       eb d4
//	ts:   {1, 0}
var initCode = []byte{
	0x48, 0xc7, 0xc7, 0xff, 0xff, 0xff, 0xff, 0x31, 0xf6, 0x31, 0xd2, 0x45,
	0x31, 0xd2, 0xb8, 0x3d, 0x00, 0x00, 0x00, 0x0f, 0x05, 0x48, 0x85, 0xc0,
	0x79, 0xe6, 0x48, 0x8d, 0x3d, 0x0b, 0x00, 0x00, 0x00, 0x31, 0xf6, 0xb8,
	0x23, 0x00, 0x00, 0x00, 0x0f, 0x05, 0xeb, 0xd4,
	1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
}

// initELF wraps initCode in an ELF64 header and one loadable, read-only
// and executable segment at 0x400000.
func initELF() []byte {
	const (
		base    = 0x400000
		ehsize  = 64
		phsize  = 56
		codeOff = ehsize + phsize
	)
	le := binary.LittleEndian
	b := make([]byte, codeOff, codeOff+len(initCode))
	copy(b, []byte{0x7f, 'E', 'L', 'F', 2, 1, 1}) // 64-bit, little-endian, version 1, SysV ABI
	le.PutUint16(b[16:], 2)                       // ET_EXEC
	le.PutUint16(b[18:], 62)                      // EM_X86_64
	le.PutUint32(b[20:], 1)                       // EV_CURRENT
	le.PutUint64(b[24:], base+codeOff)            // entry
	le.PutUint64(b[32:], ehsize)                  // program headers
	le.PutUint16(b[52:], ehsize)
	le.PutUint16(b[54:], phsize)
	le.PutUint16(b[56:], 1) // one program header
	ph := b[ehsize:]
	le.PutUint32(ph[0:], 1) // PT_LOAD
	le.PutUint32(ph[4:], 5) // PF_R|PF_X
	le.PutUint64(ph[16:], base)
	le.PutUint64(ph[24:], base)
	le.PutUint64(ph[32:], uint64(codeOff+len(initCode)))
	le.PutUint64(ph[40:], uint64(codeOff+len(initCode)))
	le.PutUint64(ph[48:], 0x1000)
	return append(b, initCode...)
}
