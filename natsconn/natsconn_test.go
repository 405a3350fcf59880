package natsconn_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"

	"github.com/agent-runner/agent-runner/natsconn"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/nats-io/nats-server/v2/server.(*Server).startGoRoutine.func1"),
		goleak.IgnoreTopFunction("time.Sleep"),
		goleak.IgnoreAnyFunction("github.com/nats-io/nats.go.(*Conn).flusher"),
	)
}

var addr = natsconn.Addr{To: "test.to.w1", From: "test.from.w1"}

// fast keeps the tests' peer timeouts short.
var fast = natsconn.Config{KeepAlive: 50 * time.Millisecond, PeerTimeout: 300 * time.Millisecond}

// natsServer starts an embedded NATS server without a listener.
func natsServer(t *testing.T) *server.Server {
	t.Helper()
	ns, err := server.NewServer(&server.Options{DontListen: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("NATS did not start")
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	return ns
}

// connect opens a client of ns, closed at the end of the test.
func connect(t *testing.T, ns *server.Server) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(ns.ClientURL(), nats.InProcessServer(ns))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// pair is a listener on one client and a dialed connection from
// another, with the accepted side.
func pair(t *testing.T, cfg natsconn.Config) (dialed, accepted net.Conn, listenerNC *nats.Conn) {
	t.Helper()
	ns := natsServer(t)
	lnc, dnc := connect(t, ns), connect(t, ns)
	l, err := natsconn.Listen(lnc, addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	d, err := natsconn.Dial(context.Background(), dnc, addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	a, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return d, a, lnc
}

// TestLargeTransferInOrder echoes 8 MiB through a small window and
// small frames: every byte comes back, in order.
func TestLargeTransferInOrder(t *testing.T) {
	d, a, _ := pair(t, natsconn.Config{Window: 64 << 10, MaxFrame: 4 << 10})
	go io.Copy(a, a)
	data := make([]byte, 8<<20)
	rand.Read(data)
	go d.Write(data)
	got := make([]byte, len(data))
	if _, err := io.ReadFull(d, got); err != nil {
		t.Fatalf("ReadFull: %v", err)
	}
	if sha256.Sum256(got) != sha256.Sum256(data) {
		t.Fatal("the echoed bytes differ from the written ones")
	}
}

// TestCloseDeliversThenEOF: what a side wrote before it closed is read
// whole, then io.EOF; a write after that fails.
func TestCloseDeliversThenEOF(t *testing.T) {
	d, a, _ := pair(t, natsconn.Config{})
	want := bytes.Repeat([]byte("0123456789"), 50000)
	go func() {
		a.Write(want)
		a.Close()
	}()
	got, err := io.ReadAll(d)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("ReadAll = %d bytes, %v; want %d bytes, nil", len(got), err, len(want))
	}
	if _, err := d.Write([]byte("late")); !errors.Is(err, natsconn.ErrPeerClosed) {
		t.Errorf("Write after the peer closed = %v, want %v", err, natsconn.ErrPeerClosed)
	}
	d.Close()
	if _, err := d.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Read after Close = %v, want %v", err, net.ErrClosed)
	}
}

// TestDialWithoutListener fails at once with ErrNoListener.
func TestDialWithoutListener(t *testing.T) {
	nc := connect(t, natsServer(t))
	_, err := natsconn.Dial(context.Background(), nc, addr, natsconn.Config{PeerTimeout: time.Hour})
	if !errors.Is(err, natsconn.ErrNoListener) {
		t.Fatalf("Dial = %v, want %v", err, natsconn.ErrNoListener)
	}
}

// TestPeerVanishes: when the listener's NATS connection goes, a read and
// a write blocked on a full window both end with ErrPeerLost.
func TestPeerVanishes(t *testing.T) {
	cfg := fast
	cfg.Window = 8 << 10
	d, _, lnc := pair(t, cfg)
	writeErr := make(chan error, 1)
	go func() {
		// Nobody reads on the other side: the window fills.
		_, err := d.Write(make([]byte, 1<<20))
		writeErr <- err
	}()
	readErr := make(chan error, 1)
	go func() {
		_, err := d.Read(make([]byte, 10))
		readErr <- err
	}()
	lnc.Close()
	if err := <-readErr; !errors.Is(err, natsconn.ErrPeerLost) {
		t.Errorf("Read = %v, want %v", err, natsconn.ErrPeerLost)
	}
	if err := <-writeErr; !errors.Is(err, natsconn.ErrPeerLost) {
		t.Errorf("Write = %v, want %v", err, natsconn.ErrPeerLost)
	}
}

// TestIdleConnectionStaysUp: keep-alives hold an idle connection past
// many peer timeouts (a read then still gets what is written).
func TestIdleConnectionStaysUp(t *testing.T) {
	d, a, _ := pair(t, fast)
	idle := make(chan struct{})
	time.AfterFunc(5*fast.PeerTimeout, func() { close(idle) })
	<-idle
	go a.Write([]byte("still here"))
	got := make([]byte, 10)
	if _, err := io.ReadFull(d, got); err != nil || string(got) != "still here" {
		t.Fatalf("after idling: %q, %v", got, err)
	}
}

// TestReadDeadline: a passed deadline is a timeout, and a cleared one
// lets the read go on.
func TestReadDeadline(t *testing.T) {
	d, a, _ := pair(t, natsconn.Config{})
	d.SetReadDeadline(time.Now().Add(-time.Second))
	_, err := d.Read(make([]byte, 1))
	var ne net.Error
	if !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("Read past the deadline = %v, want a timeout", err)
	}
	d.SetReadDeadline(time.Time{})
	go a.Write([]byte("x"))
	if _, err := io.ReadFull(d, make([]byte, 1)); err != nil {
		t.Fatalf("Read after clearing the deadline: %v", err)
	}
}

// TestPeerBeyondWindowIsCutOff: a listener that ignores the window (a
// hostile worker) ends the connection with ErrProtocol instead of
// growing the dialer's buffer.
func TestPeerBeyondWindowIsCutOff(t *testing.T) {
	ns := natsServer(t)
	raw, dnc := connect(t, ns), connect(t, ns)
	frame := func(typ byte, seq uint64, p []byte) []byte {
		b := append([]byte{typ}, binary.BigEndian.AppendUint64(nil, seq)...)
		return append(b, p...)
	}
	raw.Subscribe(addr.To+".dial", func(m *nats.Msg) {
		out := addr.From + ".c." + string(m.Data)
		raw.Publish(out, frame('a', 1, nil))
		raw.Publish(out, frame('d', 2, make([]byte, 6000)))
		raw.Publish(out, frame('d', 3, make([]byte, 10000)))
	})
	raw.Flush()
	d, err := natsconn.Dial(context.Background(), dnc, addr, natsconn.Config{Window: 8 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	_, err = io.ReadAll(d)
	if !errors.Is(err, natsconn.ErrProtocol) {
		t.Fatalf("ReadAll = %v, want %v", err, natsconn.ErrProtocol)
	}
}

// TestHTTPOverConnections: an http.Server on a Listener answers an
// http.Client whose transport dials over NATS, on kept-alive and fresh
// connections.
func TestHTTPOverConnections(t *testing.T) {
	ns := natsServer(t)
	lnc, dnc := connect(t, ns), connect(t, ns)
	l, err := natsconn.Listen(lnc, addr, natsconn.Config{})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Write(append([]byte(r.URL.Path+" "), b...))
	})}
	go srv.Serve(l)
	defer srv.Close()
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return natsconn.Dial(ctx, dnc, addr, natsconn.Config{})
	}}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	for i, body := range []string{"one", "two", string(bytes.Repeat([]byte("z"), 3<<20))} {
		resp, err := c.Post("http://worker/echo", "text/plain", bytes.NewBufferString(body))
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || string(got) != "/echo "+body {
			t.Fatalf("request %d = %d bytes, %v; want the echo", i, len(got), err)
		}
	}
}
