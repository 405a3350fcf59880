// Package process is the generated Go code of envd's process service as the
// E2B-compatible door declares it (process.proto; scripts/gen-e2b-proto
// regenerates it): the messages, with processconnect holding the
// Connect-RPC handler and client.
package process
