package snapshot

import (
	"path"
	"strings"
)

// protectedDirs are directory names skipped anywhere in a workspace.
var protectedDirs = map[string]bool{
	".git": true, ".hg": true, ".svn": true, ".jj": true,
	".venv": true, "venv": true, ".virtualenv": true, "virtualenv": true, "__pypackages__": true, ".tox": true, ".nox": true,
	"target": true, "node_modules": true, "bower_components": true,
	".cache": true, "__pycache__": true, ".pytest_cache": true, ".mypy_cache": true, ".ruff_cache": true,
	".gradle": true, ".m2": true, ".ivy2": true, ".npm": true, ".pnpm-store": true, ".yarn": true,
	".cargo": true, ".rustup": true, ".bundle": true, ".terraform": true,
	"secrets": true, ".secrets": true, ".ssh": true, ".gnupg": true, ".aws": true, ".azure": true,
	".kube": true, ".docker": true, ".config/gcloud": true,
}

// protectedFiles are exact file names skipped anywhere.
var protectedFiles = map[string]bool{
	".netrc": true, "_netrc": true, ".npmrc": true, ".pypirc": true, ".git-credentials": true,
	"id_rsa": true, "id_dsa": true, "id_ecdsa": true, "id_ed25519": true, "id_ecdsa_sk": true, "id_ed25519_sk": true,
	"credentials.json": true, ".htpasswd": true,
}

// protectedSuffixes are private-key and keystore file extensions.
var protectedSuffixes = []string{".pem", ".key", ".p12", ".pfx", ".jks", ".keystore", ".ppk", ".kdbx", ".gpg", ".asc"}

// dependencyDirs are the protected directories that hold installed
// dependencies, virtual environments or build output rather than
// credentials: never copied into a snapshot, but a job may bind them
// read-only (workspace.readonly_mounts; see Secret).
var dependencyDirs = map[string]bool{
	".venv": true, "venv": true, ".virtualenv": true, "virtualenv": true, "__pypackages__": true, ".tox": true, ".nox": true,
	"target": true, "node_modules": true, "bower_components": true,
	"__pycache__": true, ".pytest_cache": true, ".mypy_cache": true, ".ruff_cache": true, ".pnpm-store": true,
}

// Protected reports whether the workspace-relative path rel (slash form) is
// covered by the always-on exclusions. Every element is checked, so
// "a/secrets/b.txt" is protected.
func Protected(rel string) bool { return protected(rel, false) }

// Secret reports whether rel is protected for what it may hold
// (credentials, keys, VCS metadata, tool caches and settings): Protected
// without dependencyDirs. A read-only mount may name node_modules or
// .venv, never .ssh, .git, .cargo or a path through them.
func Secret(rel string) bool { return protected(rel, true) }

func protected(rel string, allowDeps bool) bool {
	if rel == "." || rel == "" {
		return false
	}
	parts := strings.Split(rel, "/")
	for i, p := range parts {
		last := i == len(parts)-1
		if protectedDirs[p] && !(allowDeps && dependencyDirs[p]) || i > 0 && protectedDirs[parts[i-1]+"/"+p] {
			return true
		}
		if p == ".env" || strings.HasPrefix(p, ".env.") {
			return true
		}
		if last && protectedName(p) {
			return true
		}
	}
	return false
}

func protectedName(name string) bool {
	if protectedFiles[name] {
		return true
	}
	if strings.HasPrefix(name, "id_rsa") || strings.HasPrefix(name, "id_ed25519") || strings.HasPrefix(name, "id_ecdsa") || strings.HasPrefix(name, "id_dsa") {
		return !strings.HasSuffix(name, ".pub")
	}
	ext := strings.ToLower(path.Ext(name))
	for _, s := range protectedSuffixes {
		if ext == s {
			return true
		}
	}
	return false
}
