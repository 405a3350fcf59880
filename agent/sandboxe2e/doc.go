// Package sandboxe2e holds end-to-end tests of the agent runtime's
// subprocess tools on the linux_sandbox backend: the seed's tester tasks,
// read roots mounted read-only and write roots writable inside the job.
// It has no non-test code; it exists so linux_sandbox's re-exec hook can
// be installed in its own test binary.
package sandboxe2e
