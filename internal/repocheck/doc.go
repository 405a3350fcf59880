// Package repocheck holds repository-wide tests: every package has a doc
// comment, and dependencies point inward (the job contract imports nothing
// of the project and no transport or backend).
package repocheck
