// Package session keeps sandboxes a caller holds across many calls (issue
// 23's sessions): created once, then any number of execs, file reads,
// writes, listings, removals and moves (filetree.go, over the sandbox's
// backend.SandboxFiles), connections to servers listening inside it
// (DialPort, ports.go), pauses and resumes, until the caller deletes it,
// its timeout ends it or it idles (idle.go), within the operator's caps
// (caps.go). A session is a record of the store's kind store.Sessions
// (<store>/sessions/<id>/session.json, its workspace beside it) over a
// live sandbox of the run service (runner.OpenSandbox); each exec is one
// recorded run of the run service (runner.Step in the sandbox, decided by
// policy at every exec). The live handles are in memory: a sandbox whose
// process ended with serve is recorded failed (run.interrupted) when the
// service starts again. On an API node it also keeps the records of
// sandboxes placed on remote workers (placed.go), which live on there.
// The service knows no transport (door/sessionapi is its HTTP door,
// door/sessionapi/sessionremote carries it across hosts) and no backend
// implementation.
package session
