package sessionapi_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"testing"

	"github.com/coder/websocket"

	"github.com/agent-runner/agent-runner/backend/linuxsandbox"
)

// portServerEnv makes the test binary the server the ports tests start
// inside a sandbox (portServer) instead of running the tests.
const portServerEnv = "SESSIONAPI_TEST_PORT_SERVER"

func TestMain(m *testing.M) {
	if os.Getenv(portServerEnv) == "1" {
		portServer()
		os.Exit(0)
	}
	linuxsandbox.MaybeInit()
	os.Exit(m.Run())
}

// seen is what portServer's /echo reports of the request it got.
type seen struct {
	Method, Path, RawPath, Query, Host, Body string
	Header                                   http.Header
}

// portServer listens on a loopback port the kernel picks, prints it,
// and serves /echo (the request it got, as JSON), /count (how many
// bytes the body had) and /ws (a WebSocket echoing every message).
func portServer() {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(ln.Addr().(*net.TCPAddr).Port)
	mux := http.NewServeMux()
	mux.HandleFunc("/echo/", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(seen{Method: r.Method, Path: r.URL.Path, RawPath: r.URL.RawPath, Query: r.URL.RawQuery, Host: r.Host, Body: string(body), Header: r.Header})
	})
	mux.HandleFunc("/count", func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		fmt.Fprint(w, n)
	})
	mux.HandleFunc("/ws", func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
		if err != nil {
			return
		}
		defer c.CloseNow()
		for {
			typ, b, err := c.Read(r.Context())
			if err != nil {
				return
			}
			if err := c.Write(r.Context(), typ, b); err != nil {
				return
			}
		}
	})
	http.Serve(ln, mux)
}
