package eventstream

import (
	"context"
	"net/http"

	"github.com/coder/websocket"
)

// serveWebSocket writes follow's messages as WebSocket text messages
// (Data only: a message carries its id inside), closing normally with
// follow's reason once the stream is complete.
func serveWebSocket(w http.ResponseWriter, r *http.Request, opts Options, follow Follow) {
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer c.CloseNow()
	ctx := c.CloseRead(r.Context())
	done, err := follow(ctx, func(m Message) error {
		wctx, cancel := context.WithTimeout(ctx, opts.writeTimeout())
		defer cancel()
		return c.Write(wctx, websocket.MessageText, m.Data)
	})
	switch {
	case ctx.Err() != nil:
	case err != nil:
		c.Close(websocket.StatusInternalError, "stream failed")
	default:
		if done == "" {
			done = "end of stream"
		}
		c.Close(websocket.StatusNormalClosure, done)
	}
}
