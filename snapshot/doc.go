// Package snapshot makes the copy of a workspace a job runs in, so a job
// never touches the caller's files. Walk applies the include and exclude
// globs and the always-on protected exclusions (VCS data, virtualenvs,
// build outputs, dependency caches, .env files, private keys, secrets/),
// never follows a symlink out of the workspace and skips special files. Copy
// writes the selected tree and returns its deterministic SHA-256 over
// (path, type, mode, content).
//
// Every read of the workspace (the walk, each file's copy or hash, the
// overlay fingerprint) goes through package safecopy from one descriptor
// of the workspace root: no symlink is followed at any level, and a file
// is read only if it is the one the walk listed (device and inode), so a
// directory swapped for a link to a host directory while a snapshot is
// taken fails the snapshot instead of copying a host file into it.
package snapshot
