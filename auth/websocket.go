package auth

import (
	"encoding/base64"
	"net/http"
	"strings"
)

// WebSocketTokenPrefix begins the WebSocket subprotocol that carries a
// bearer token, as Kubernetes' API server accepts it: a browser's
// WebSocket cannot set an Authorization header, but it can offer
// subprotocols, so the dashboard's terminal offers
// "base64url.bearer.authorization.k8s.io.<token, unpadded base64url>"
// beside the one it speaks. The header is not part of the URL, so access
// logs and the Referer never hold the token; the server never answers
// with this subprotocol (it selects the one it speaks).
const WebSocketTokenPrefix = "base64url.bearer.authorization.k8s.io."

// bearer is the request's bearer token: the Authorization header's, or,
// on a WebSocket handshake without one, the token subprotocol's.
func bearer(r *http.Request) (string, bool) {
	if h := r.Header.Get("Authorization"); h != "" {
		return strings.CutPrefix(h, "Bearer ")
	}
	if !isWebSocketHandshake(r) {
		return "", false
	}
	for _, list := range r.Header.Values("Sec-WebSocket-Protocol") {
		for _, p := range strings.Split(list, ",") {
			enc, ok := strings.CutPrefix(strings.TrimSpace(p), WebSocketTokenPrefix)
			if !ok {
				continue
			}
			b, err := base64.RawURLEncoding.DecodeString(enc)
			if err != nil {
				return "", false
			}
			return string(b), true
		}
	}
	return "", false
}

// isWebSocketHandshake reports whether r asks to upgrade to a WebSocket.
func isWebSocketHandshake(r *http.Request) bool {
	return r.Method == http.MethodGet && strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}
