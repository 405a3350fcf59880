// Package processconnect is the generated Connect-RPC handler and client
// of envd's process service (../process.proto; scripts/gen-e2b-proto regenerates
// it), served by the E2B-compatible door.
package processconnect
