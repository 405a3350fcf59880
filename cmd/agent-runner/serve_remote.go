package main

import (
	"errors"
	"log/slog"
	"path/filepath"

	"github.com/agent-runner/agent-runner/queue"
)

// checkNATSAuth refuses, before anything starts, a NATS listener that
// would have no credential (token is AGENT_RUNNER_NATS_TOKEN): a loopback
// one gets a generated token (natsCredentials), any other needs the
// variable or --nats-workers.
func checkNATSAuth(o serveOptions, token string) error {
	if o.natsWorkersFile != "" && o.natsListen == "" {
		return usageError{errors.New("--nats-workers needs --nats-listen (an external NATS server's permissions are its own)")}
	}
	if o.natsListen != "" && !loopback(o.natsListen) && token == "" && o.natsWorkersFile == "" {
		return usageError{errors.New("exposing NATS on a non-loopback address requires AGENT_RUNNER_NATS_TOKEN or --nats-workers")}
	}
	return nil
}

// natsCredentials are the shared token and the worker credentials of
// the queue. A listener with neither gets a random shared token, kept in
// <store>/nats/token (0600, only this user reads it), which workers on
// this host pass with --nats-token-file.
func natsCredentials(o serveOptions, storeDir, token string, log *slog.Logger) (string, []queue.Worker, error) {
	var workers []queue.Worker
	if o.natsWorkersFile != "" {
		ws, err := queue.LoadWorkers(o.natsWorkersFile)
		if err != nil {
			return "", nil, err
		}
		for _, w := range ws {
			log.Info("NATS worker credential", "worker", w.Name, "worker_id", w.ID())
		}
		workers = ws
	}
	if o.natsListen != "" && token == "" && len(workers) == 0 {
		path, generated, err := queue.EnsureTokenFile(filepath.Join(storeDir, "nats"))
		if err != nil {
			return "", nil, err
		}
		log.Info("NATS listener token (full rights): pass it to workers on this host with --nats-token-file", "path", path)
		token = generated
	}
	return token, workers, nil
}
