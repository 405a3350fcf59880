// Package remote carries run records from a worker to the API node over
// the NATS JetStream the queue already uses, so the two need no shared
// filesystem.
//
// A record is a directory (a job's runs/<id>/, a task's tasks/<id>/) with
// one commit file (result.json, state.json) written last. Kind says which
// files of the directory travel and which one commits: Jobs, whose
// result.json is only ever created, and a task's (package task/taskremote
// defines it: remote knows no domain's record), whose terminal state.json
// replaces the pending one the API node recorded at the submit, but never
// a terminal one. Live events travel in the queue's envelope, whose
// payload remote does not read except for a job's status.
//
//   - Worker side, Publisher: once the record is written and before the
//     queue message is acknowledged, the files go to the object store
//     bucket AR_RECORDS (objects <kind>/<id>/<path>), except small ones,
//     which ride in the message itself; then a Manifest (kind, id,
//     attempt, every file's path, size and SHA-256, the commit file last)
//     is published on the file-backed work-queue stream AR_RECORDS
//     (subject ar.records.<worker>.<kind>.<id>, objects
//     <worker>/<kind>/<id>/<path>, where <worker> is the worker's identity,
//     queue.WorkerID of its token). A failed upload leaves the job
//     unacknowledged, so the queue delivers it again.
//   - Binding: the API node's queue claims each delivery in the name of
//     the worker whose inbox the server delivered it to (package queue;
//     workers cannot write claims, and the embedded server lets a worker
//     publish records under its own identity only). The Mirror accepts a
//     record only from the worker of the latest claim of its id; any
//     other (a stale attempt's, or forged) is tried again for a few
//     seconds (a claim may be late), then dropped and logged: it never
//     ends the job nor touches this node's record.
//   - API side, Mirror: a durable consumer takes each manifest, checks it
//     as untrusted input (paths through package safepath, a size and file
//     count cap), writes every file into the node's own record directory
//     through an os.Root, verifies each SHA-256, and writes the commit file
//     last and only if absent (a finished record is never rewritten). Then
//     it acknowledges the manifest and deletes the objects. A record the
//     node already has (a shared store) is acknowledged as it is. A
//     manifest that can never be applied ends the job with a recorded
//     reason instead of leaving it running.
//   - Status: the Mirror also follows the status events workers publish
//     (the queue's envelope of kind job, on ar.events.job.<id>) and moves a job that has no result forward to
//     running with its attempt, so GET shows the job running on another
//     host.
//
// Tasks (package task/taskremote, over NewMirror): the worker publishes
// each task state change on the bus; the API node moves its task forward
// through the state machine, never back and never to a terminal state,
// which comes with the record (once the task is terminal and before its
// message is acknowledged). The Mirror and that follower hold one lock
// (MirrorConfig.Lock), so a late state event never lands on a finished
// record.
//
// The worker publishes its terminal status event before the record has
// reached the API node; the Mirror publishes the terminal status again
// once the commit file is written, so waiters (GET ?wait, Wait) wake when
// the result can be read.
package remote
