// Command guestinit is the init (pid 1) of a guestvm guest: build it
// static (CGO_ENABLED=0) and pack it as /init in the initramfs.
package main

import "github.com/agent-runner/agent-runner/internal/guestvm"

func main() { guestvm.Init() }
