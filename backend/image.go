package backend

// Image is a container image a sandbox's root is made of: the image
// store (package image) resolves a reference to one, with its layers
// unpacked and merged into a read-only directory. A backend that runs
// images uses RootFS as the lower, read-only layer of the sandbox's root
// and never writes to it; everything the workload writes goes to a
// per-sandbox upper layer deleted with the sandbox.
type Image struct {
	// Ref is the reference as the caller named it (name:tag or
	// sha256:<hex>); Digest the image's manifest digest (sha256:<hex>).
	Ref    string
	Digest string
	// RootFS is the directory of the unpacked root file system. It is
	// read-only to everyone but the image store.
	RootFS string
	// Env, WorkingDir and User are the image config's defaults: the
	// environment ("KEY=value"), the working directory and the user
	// ("" or "root": uid 0 inside the sandbox's user namespace).
	Env        []string
	WorkingDir string
	User       string
}
