// Package repocheck holds repository-wide tests: every package has a doc
// comment, and dependencies point inward (deps_test.go: which packages may
// pick a backend implementation, import an HTTP door or a domain's
// internals; the job contract imports nothing of the project and no
// transport; the known exceptions, each with the issue that removes it).
package repocheck
