// Package snapshot makes the copy of a workspace a job runs in, so a job
// never touches the caller's files. Walk applies the include and exclude
// globs and the always-on protected exclusions (VCS data, virtualenvs,
// build outputs, dependency caches, .env files, private keys, secrets/),
// never follows a symlink out of the workspace and skips special files. Copy
// writes the selected tree and returns its deterministic SHA-256 over
// (path, type, mode, content).
package snapshot
