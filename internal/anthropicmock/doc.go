// Package anthropicmock is a test double of the Anthropic Messages API.
//
// A Server plays a Script: each /v1/messages request is answered with the
// turn the conversation has reached (the number of assistant messages in the
// request), streamed as server-sent events exactly as the real API frames
// them, or as one JSON Message when the request does not stream. Every
// request is recorded for assertions. The server speaks TLS with a leaf
// certificate for the hostnames it is given, signed by a CA it generates, so
// a client can reach it under the real name (api.anthropic.com) through a
// proxy that trusts that CA.
//
// CLI installs Claude Code from npm into a reusable cache, for tests that run
// the real CLI against the mock.
package anthropicmock
