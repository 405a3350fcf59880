// Package filesystem is the generated Go code of envd's filesystem service as the
// E2B-compatible door declares it (filesystem.proto; scripts/gen-e2b-proto
// regenerates it): the messages, with filesystemconnect holding the
// Connect-RPC handler and client.
package filesystem
