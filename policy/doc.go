// Package policy decides whether a validated request may run: the command
// allowlist (basenames, or detailed entries pinning a resolved path and its
// SHA-256), shell denial (including shells reached through wrappers such as
// env, xargs, nice or timeout), the deny-by-default child environment and,
// under exec_scope every_process, the programs the job may execute at all.
// A denial is a *job.Error with a policy.* code; it becomes a terminal
// policy_denied result, never a crash.
package policy
