package main

import "path/filepath"

// defaultAgentRunsDir is where launch, run-agent and mcp --manifest keep
// capability runs unless --runs-dir says otherwise: inside the default
// store (as serve keeps them in <store>/agent-runs), not a runs/ directory
// left in whatever checkout the command was started from.
var defaultAgentRunsDir = filepath.Join(defaultStoreDir, "agent-runs")
