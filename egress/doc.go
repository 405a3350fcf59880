// Package egress is the host-side egress gateway of a run in allowlist
// network mode. A sandbox has no network of its own: its outbound TCP
// connections arrive, as an HTTP proxy client speaks them, on a per-run
// net.Listener that Gateway.Serve serves. For each connection the gateway
// checks the target against the run's allowlist (Rule), the TLS SNI or
// HTTP Host against the target (no domain fronting), resolves the name
// itself (at most Config.MaxNames distinct names per run), refuses internal
// addresses unless the operator pinned the name (Config.Resolve), dials the
// resolved address and records one Decision. Refusals, which the workload
// makes at will, are recorded one by one only up to per-run caps, then
// counted into summary Decisions, and logged at most once per interval.
//
// For hosts a secret is bound to (Binding), the gateway terminates TLS
// with a leaf certificate from the run's CA and replaces the secret's
// placeholder with its real value in request headers, so the real value
// never enters the sandbox. The package knows nothing of backends; the
// caller wires the listener, the run's rules and secrets, and the audit
// sink.
package egress
