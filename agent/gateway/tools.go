package gateway

import "github.com/agent-runner/agent-runner/agent/manifest"

// tools is every tool the gateway implements; a policy offers a subset.
var tools = []tool{
	define(manifest.ToolListLogs, "List the entries of a directory under a read root.", listLogs),
	define(manifest.ToolReadLog, "Read a file under a read root (at most 512 KiB).", readLog),
	define(manifest.ToolTailLog, "Return the last lines of a file under a read root (default 100, at most 10000).", tailLog),
	define(manifest.ToolGrepLog, "Find lines containing a substring in a file, or recursively in a directory, under a read root.", grepLog),
	define(manifest.ToolRunTests, "Run an allowlisted command in a copy of a directory under a read root, as an isolated job.", runTests),
	define(manifest.ToolGitStatus, "Show git status (fixed arguments) of a repository under a read root, as an isolated job.", gitStatus),
}
