// Package filesystemconnect is the generated Connect-RPC handler and client
// of envd's filesystem service (../filesystem.proto; scripts/gen-e2b-proto regenerates
// it), served by the E2B-compatible door.
package filesystemconnect
