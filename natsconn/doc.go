// Package natsconn carries a byte stream, a net.Conn, over NATS subjects,
// so that HTTP (and a WebSocket it upgrades to) can travel between two
// processes that share nothing but a NATS server.
//
// A listener hears dials on <To>.dial; a dialer subscribes to its own
// connection's subject <From>.c.<cid> first, then publishes the dial
// with that subject as its reply (so the server answers "no responders"
// at once when nobody listens: ErrNoListener). The listener subscribes
// to <To>.c.<cid> and answers accept on <From>.c.<cid>; from then on
// each side publishes to the other's subject. A peer may only be
// reached on subjects its NATS permissions let it hear, and only answer
// on subjects they let it publish to, so the subject prefixes bind a
// connection to the identity behind them.
//
// Every frame is one NATS message: a type byte, a sequence number per
// direction (a gap means NATS dropped a message: the connection fails
// with ErrFrameLost rather than corrupt the stream), and the payload.
// NATS keeps one publisher's messages on one subject in order. Flow
// control is a window: a writer has at most Config.Window bytes that
// the reader has not consumed in flight, and the reader returns credit
// as it reads, so neither side's buffer grows past the window (a peer
// that sends beyond it is cut off). Each side pings when it has sent
// nothing for Config.KeepAlive and gives the connection up with
// ErrPeerLost when it heard nothing for Config.PeerTimeout, so a peer
// that vanished (killed, its NATS connection gone) never leaves a read
// or a write waiting forever. Deadlines are net.Conn's.
package natsconn
