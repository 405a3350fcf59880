// Package sessionremote carries kept sandboxes across hosts: a sandbox
// lives on the worker that created it (serve's own session service, or
// an `agent-runner worker` elsewhere with its own store), and the API
// node routes every call for it to that worker over NATS, with no shared
// filesystem.
//
//   - Host (worker side) serves the sessions door (door/sessionapi over
//     the worker's own session.Service) on a natsconn listener instead
//     of a TCP port, heartbeats its load (live and maximum sandboxes,
//     backends) every HeartbeatInterval, and sends every record its
//     service writes to the API node.
//   - Router (API node side) wraps the sessions routes: a create is
//     placed on the worker with the most free room (serve's own service
//     counts as one when it hosts sandboxes), its id claimed first in
//     the API node's store (session.Service.Place); every call for a
//     sandbox placed on a worker is forwarded whole, as HTTP over a
//     natsconn connection (httputil.ReverseProxy: exec, files, process
//     events, the PTY WebSocket, and any route the door gains later).
//     The worker's records update the API node's copy
//     (session.Service.Mirror), so list and get answer from it and the
//     bus carries its state events.
//   - A worker whose heartbeats stop for RouterConfig.LostAfter is lost:
//     its sandboxes are recorded failed with session.worker_lost, its
//     open connections are closed, and calls for them answer that code.
//     A dial nobody answers (the worker's NATS connection is gone) is
//     session.worker_lost at once. A lost worker that is heard again is
//     told so: it ends its sandboxes and comes back as a new instance.
//
// Subjects (the queue's worker permissions bind them to the worker's
// identity, so a worker can neither hear another's calls nor speak for
// its sandboxes): ar.sandboxes.to.<worker id>.<instance>.> to the
// worker, ar.sandboxes.from.<worker id>.<instance>.> from it (.beat,
// .record, and the natsconn connections under .http). A worker is never
// sent the caller's token: the router drops Authorization, as the API
// node has already authorized the call.
package sessionremote
