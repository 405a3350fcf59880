package httpapi_test

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/door/httpapi"
)

// TestLimitConnsPerIP: one client IP holds at most max connections; one
// over it is closed on accept, and a slot comes back when a connection
// closes.
func TestLimitConnsPerIP(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := httpapi.LimitConnsPerIP(raw, 2)
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { // greet, then hold until the client goes
				c.Write([]byte("hi"))
				io.Copy(io.Discard, c)
				c.Close()
			}()
		}
	}()
	// dial reports whether the server greeted the connection; one it
	// closed on accept may even fail to connect (reset).
	dial := func() (net.Conn, bool) {
		c, err := net.Dial("tcp", raw.Addr().String())
		if err != nil {
			return nopConn{}, false
		}
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		b := make([]byte, 2)
		_, err = io.ReadFull(c, b)
		return c, err == nil && string(b) == "hi"
	}
	var got []bool
	a, ok := dial()
	got = append(got, ok)
	b, ok := dial()
	got = append(got, ok)
	defer b.Close()
	over, ok := dial()
	got = append(got, ok)
	over.Close()
	a.Close()
	// The server sees a's close and gives its slot back.
	var again bool
	for deadline := time.Now().Add(5 * time.Second); !again && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var c net.Conn
		c, again = dial()
		defer c.Close()
	}
	got = append(got, again)
	if want := []bool{true, true, false, true}; !cmp.Equal(got, want) {
		t.Errorf("accepted (1st, 2nd, 3rd over the cap, after one closed): got %v, want %v", got, want)
	}
}

// TestLimitConnsPerIPZeroIsUnlimited: max <= 0 returns the listener as it is.
func TestLimitConnsPerIPZeroIsUnlimited(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if got := httpapi.LimitConnsPerIP(raw, 0); got != raw {
		t.Errorf("LimitConnsPerIP(ln, 0): got %T, want the listener itself", got)
	}
}

// nopConn stands for a connection that failed to connect.
type nopConn struct{ net.Conn }

func (nopConn) Close() error { return nil }
