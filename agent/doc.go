// Package agent is the capability runtime: role-scoped agents whose every
// tool call passes a compiled policy. Its subpackages are
//
//	manifest  load a manifest (YAML or JSON) and compile it to a Policy
//	rootfs    resolve caller paths inside policy roots through file descriptors
//	gateway   the typed tools; policy is checked before any I/O
//	audit     the append-only, hash-chained audit.jsonl and its verifier
//	model     the model-client interface, a mock, OpenAI and Anthropic clients
//	loop      the agent loop (model <-> gateway) and conversation.json
//	launch    scripted runs and run directories (runs/<uuid>/)
//	runs      serve's capability-run service over launch and loop: launch,
//	          background runs, statuses, records in the store, retention
//
// door/agentapi is the HTTP door (/v1/agent-runs) over runs.
//
// Subprocess tools never spawn processes themselves: they become job
// requests run by the runner pipeline.
package agent
