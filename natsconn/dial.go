package natsconn

import (
	"context"
	"crypto/rand"
	"fmt"
	"net"

	"github.com/nats-io/nats.go"
)

// Dial opens a connection to the listener at addr. It fails with
// ErrNoListener at once when nobody listens there, ErrRefused when the
// listener does not take it, and the context's error when no answer
// comes before ctx ends (without a deadline of its own, ctx is given
// Config.PeerTimeout).
func Dial(ctx context.Context, nc *nats.Conn, addr Addr, cfg Config) (net.Conn, error) {
	cfg = cfg.withDefaults()
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.PeerTimeout)
		defer cancel()
	}
	cid := rand.Text()
	in := addr.From + ".c." + cid
	c := newConn(nc, cfg, addr.To+".c."+cid, Addr{To: addr.From, From: addr.To}, addr)
	sub, err := nc.Subscribe(in, c.deliver)
	if err != nil {
		return nil, fmt.Errorf("natsconn: dial %s: %w", addr.To, err)
	}
	c.sub = sub
	// The reply subject is only for the server's "no responders": the
	// listener answers on the connection's subject, derived from cid.
	if err := nc.PublishMsg(&nats.Msg{Subject: addr.To + ".dial", Reply: in, Data: []byte(cid)}); err != nil {
		c.Close()
		return nil, fmt.Errorf("natsconn: dial %s: %w", addr.To, err)
	}
	c.mu.Lock()
	for !c.accepted && c.err == nil {
		changed := c.changed
		c.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			c.Close()
			return nil, fmt.Errorf("natsconn: dial %s: %w", addr.To, ctx.Err())
		}
		c.mu.Lock()
	}
	err = c.err
	c.mu.Unlock()
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("natsconn: dial %s: %w", addr.To, err)
	}
	go c.keepAlive()
	return c, nil
}
