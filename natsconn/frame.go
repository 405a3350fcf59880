package natsconn

import (
	"encoding/binary"
	"errors"
)

// Frame types: the first byte of every message on a connection's
// subjects.
const (
	frameAccept = 'a' // listener to dialer: the connection is up
	frameRefuse = 'r' // listener to dialer: not taken (payload: why)
	frameData   = 'd' // payload: stream bytes
	frameCredit = 'w' // payload: 8 bytes, the total bytes the sender of this frame consumed
	framePing   = 'p' // nothing: the sender is alive
	frameClose  = 'c' // the sender closed; no frame follows
)

// headerLen is a frame's type byte and sequence number.
const headerLen = 9

// Errors a connection's calls return.
var (
	// ErrNoListener: nobody listens on the dialed subjects (the NATS
	// server said so at once).
	ErrNoListener = errors.New("natsconn: no listener on the subject")
	// ErrRefused: the listener did not take the connection.
	ErrRefused = errors.New("natsconn: the listener refused the connection")
	// ErrPeerLost: nothing came from the peer for Config.PeerTimeout.
	ErrPeerLost = errors.New("natsconn: the peer stopped answering")
	// ErrFrameLost: a frame is missing (NATS dropped it); the stream
	// cannot go on.
	ErrFrameLost = errors.New("natsconn: a frame was lost")
	// ErrProtocol: the peer broke the protocol (a malformed frame, or
	// more bytes than the window).
	ErrProtocol = errors.New("natsconn: the peer broke the protocol")
	// ErrPeerClosed: a write after the peer closed the connection.
	ErrPeerClosed = errors.New("natsconn: the peer closed the connection")
)

// encode is a frame of type t, sequence seq, with payload p.
func encode(t byte, seq uint64, p []byte) []byte {
	b := make([]byte, headerLen+len(p))
	b[0] = t
	binary.BigEndian.PutUint64(b[1:headerLen], seq)
	copy(b[headerLen:], p)
	return b
}

// decode splits a frame; ok is false when it is too short.
func decode(b []byte) (t byte, seq uint64, p []byte, ok bool) {
	if len(b) < headerLen {
		return 0, 0, nil, false
	}
	return b[0], binary.BigEndian.Uint64(b[1:headerLen]), b[headerLen:], true
}
