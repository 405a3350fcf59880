// Package acceptance runs the paths users take, as scripts of commands
// against the built agent-runner binary (testdata/script/*.txtar, in the
// style of Go's own CLI tests): the README and docs examples, the seeds'
// fixture manifests, tasks with and without ids through each door,
// parallel CLI runs on one store, restarts, and the bad inputs users send.
//
// Commands beyond testscript's own (see commands.go): serve, stopserve,
// http, jsonvar, waitjson, gitrepo. Conditions: [root], [sandbox]
// (linux_sandbox can run a job here), [pytest].
package acceptance
