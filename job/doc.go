// Package job is the RunJobRequest / RunJobResult contract of agent-runner:
// the request and result shapes, job statuses, stable error codes and the
// canonical hashes that make a run replayable.
//
// It imports nothing from the rest of the project and nothing beyond the
// standard library, so every door (library, CLI, HTTP, MCP, Python) and every
// backend can depend on it without pulling in the others.
package job
