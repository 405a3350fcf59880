package queue

import "github.com/nats-io/nats-server/v2/server"

// Subjects and streams of package remote that a worker's permissions
// name (remote uses these constants).
const (
	// RecordsPrefix carries records: ar.records.<worker id>.<kind>.<id>.
	RecordsPrefix = "ar.records."
	// ClaimsPrefix carries claims, which only the API node writes:
	// ar.claims.<worker id>.<kind>.<id>.
	ClaimsPrefix = "ar.claims."
	// RecordsStream and RecordsBucket hold records' manifests and files;
	// ClaimsStream holds claims.
	RecordsStream = "AR_RECORDS"
	RecordsBucket = "AR_RECORDS"
	ClaimsStream  = "AR_CLAIMS"
	// SandboxesToPrefix carries the API node's messages to a worker
	// that holds sandboxes (package door/sessionapi/sessionremote):
	// ar.sandboxes.to.<worker id>.<instance>.>, which only that worker
	// may hear; SandboxesFromPrefix its answers, heartbeats and records,
	// ar.sandboxes.from.<worker id>.<instance>.>, which only it may
	// publish.
	SandboxesToPrefix   = "ar.sandboxes.to."
	SandboxesFromPrefix = "ar.sandboxes.from."
)

// InboxPrefix is the reply-subject prefix of a worker with identity id
// (a worker's connection uses it; it may subscribe to nothing else but
// cancels), so one worker never hears the replies, and thus the jobs,
// fetched by another.
func InboxPrefix(id string) string { return "_INBOX_AR." + id }

// workerPermissions is what a client holding worker id's token may do:
// take jobs and tasks (their replies come on its own inboxes, where the
// API node sees who took what: claims.go) and acknowledge them, publish
// live events, queue and cancel child tasks (a remote parent's; the
// taking worker admits them as any other), and publish records under its
// own id only. It cannot queue jobs (whose messages may mount host
// directories), read queued messages it was not delivered, create or
// change streams and consumers, follow the events stream, write claims,
// or publish a record in another worker's name.
func workerPermissions(id string) *server.Permissions {
	const api = "$JS.API."
	obj := "OBJ_" + RecordsBucket
	return &server.Permissions{
		Publish: &server.SubjectPermission{Allow: []string{
			RecordsPrefix + id + ".>",
			// Jobs' and tasks' events (a worker runs both); capability
			// runs run on the API node.
			eventsPrefix + "job.>",
			eventsPrefix + "task.>",
			tasksPrefix + ">",
			cancelSubject,
			"$JS.ACK." + JobsStream + ".>",
			api + "INFO",
			api + "STREAM.INFO." + JobsStream,
			api + "STREAM.INFO." + EventsStream,
			api + "STREAM.INFO." + RecordsStream,
			api + "STREAM.INFO." + obj,
			api + "CONSUMER.INFO." + JobsStream + "." + consumerName,
			api + "CONSUMER.INFO." + JobsStream + "." + taskConsumerName,
			api + "CONSUMER.MSG.NEXT." + JobsStream + "." + consumerName,
			api + "CONSUMER.MSG.NEXT." + JobsStream + "." + taskConsumerName,
			// Record files (jetstream.ObjectStore Put).
			"$O." + RecordsBucket + ".>",
			api + "STREAM.MSG.GET." + obj,
			api + "DIRECT.GET." + obj + ".>",
			api + "STREAM.PURGE." + obj,
			SandboxesFromPrefix + id + ".>",
		}},
		Subscribe: &server.SubjectPermission{Allow: []string{
			InboxPrefix(id) + ".>",
			cancelSubject,
			SandboxesToPrefix + id + ".>",
		}},
	}
}
