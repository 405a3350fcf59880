// Package secretfile reads the operator's secrets file (serve
// --secrets-file), the only place an agent task's secrets can come from:
//
//	secrets:
//	  ANTHROPIC_API_KEY: {env: ANTHROPIC_API_KEY, hosts: [api.anthropic.com]}
//	  GITHUB_TOKEN: {file: /etc/agent-runner/github-token}
//
// Each NAME is registered with exactly one source: env (a variable of the
// runner's environment) or file (an absolute path, read when a task is
// provisioned, trailing newlines trimmed). hosts, optional, binds the
// secret to the hosts it may be sent to (egress rules): a task's workload
// then gets only a placeholder, and the egress gateway puts the real value
// in request headers to those hosts (docs/egress.md). Any other key in an
// entry is refused when the file is loaded. Values are read only by Value;
// nothing here logs or stores them.
package secretfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/agent-runner/agent-runner/egress"
	"github.com/agent-runner/agent-runner/job"
)

// Sources of a registered secret.
const (
	SourceEnv  = "env"
	SourceFile = "file"
)

// Entry is where one registered secret's value lives.
type Entry struct {
	Source string // SourceEnv or SourceFile
	Key    string // the variable's name, or the file's absolute path
	// Hosts are the hosts the value is added for at the egress gateway;
	// a secret with hosts never enters the sandbox itself.
	Hosts []egress.Rule
}

// File is a loaded secrets file.
type File struct {
	// Path is the file it was read from, named in refusals.
	Path    string
	entries map[string]Entry
}

var namePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Load reads and checks a secrets file.
func Load(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, job.Wrap(job.CodeInvalidRequest, err, "cannot read the secrets file")
	}
	return Parse(b, path)
}

// Parse checks a secrets file's contents; path is recorded for messages.
func Parse(data []byte, path string) (*File, error) {
	bad := func(format string, args ...any) error {
		return job.Errorf(job.CodeInvalidRequest, "secrets file %s: %s", path, fmt.Sprintf(format, args...))
	}
	var doc struct {
		Secrets map[string]map[string]any `yaml:"secrets"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		return nil, bad("not a secrets file (secrets: {NAME: {env: VAR} | {file: PATH}}): %v", err)
	}
	f := &File{Path: path, entries: map[string]Entry{}}
	for name, fields := range doc.Secrets {
		if !namePattern.MatchString(name) {
			return nil, bad("secret %q: the name must be an environment variable name", name)
		}
		var e Entry
		for _, k := range sortedKeys(fields) {
			if k == "hosts" {
				hosts, ok := stringList(fields[k])
				if !ok || len(hosts) == 0 {
					return nil, bad("secret %s: hosts must be a non-empty list of host names", name)
				}
				rules, err := egress.ParseRules(hosts)
				if err != nil {
					return nil, bad("secret %s: hosts: %v", name, err)
				}
				e.Hosts = rules
				continue
			}
			v, isString := fields[k].(string)
			switch {
			case k != SourceEnv && k != SourceFile:
				return nil, bad("secret %s: unknown key %q (an entry is {env: VAR} or {file: PATH})", name, k)
			case e.Source != "":
				return nil, bad("secret %s: give env or file, not both", name)
			case !isString || v == "":
				return nil, bad("secret %s: %s must be a non-empty string", name, k)
			case k == SourceFile && !filepath.IsAbs(v):
				return nil, bad("secret %s: file %q must be an absolute path", name, v)
			case k == SourceEnv && !namePattern.MatchString(v):
				return nil, bad("secret %s: env %q is not a variable name", name, v)
			}
			e.Source, e.Key = k, v
		}
		if e.Source == "" {
			return nil, bad("secret %s: needs env or file", name)
		}
		f.entries[name] = e
	}
	return f, nil
}

// stringList reads a YAML list of strings.
func stringList(v any) ([]string, bool) {
	items, ok := v.([]any)
	if !ok {
		return nil, false
	}
	out := make([]string, 0, len(items))
	for _, it := range items {
		s, ok := it.(string)
		if !ok {
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}

// Lookup returns the registration of name.
func (f *File) Lookup(name string) (Entry, bool) {
	if f == nil {
		return Entry{}, false
	}
	e, ok := f.entries[name]
	return e, ok
}

// Names lists the registered names, sorted.
func (f *File) Names() []string {
	if f == nil {
		return nil
	}
	return sortedKeys(f.entries)
}

// MinValueBytes is the shortest value a secret may have. Values are
// scrubbed from task output by replacing every occurrence, so a short one
// ("1", "true") would be redacted from ordinary text everywhere and
// corrupt every stream-json line.
const MinValueBytes = 8

// ErrTooShort is the cause of Value's error for a value shorter than
// MinValueBytes.
var ErrTooShort = errors.New("secret value too short to scrub")

// Value reads a registered secret's value now; getenv resolves env
// entries (nil: os.Getenv). An unset variable, an empty value, an
// unreadable file or a value shorter than MinValueBytes (ErrTooShort) is
// an error that names the secret, never its value.
func (f *File) Value(name string, getenv func(string) string) (string, error) {
	e, ok := f.Lookup(name)
	if !ok {
		return "", job.Errorf(job.CodeForbidden, "secret %s is not registered in the secrets file", name)
	}
	if getenv == nil {
		getenv = os.Getenv
	}
	var v string
	switch e.Source {
	case SourceEnv:
		v = getenv(e.Key)
		if v == "" {
			return "", job.Errorf(job.CodeInvalidRequest, "secret %s: environment variable %s is not set on the runner", name, e.Key)
		}
	case SourceFile:
		b, err := os.ReadFile(e.Key)
		if err != nil {
			return "", job.Errorf(job.CodeInvalidRequest, "secret %s: its file cannot be read", name)
		}
		v = strings.TrimRight(string(b), "\r\n")
		if v == "" {
			return "", job.Errorf(job.CodeInvalidRequest, "secret %s: its file is empty", name)
		}
	}
	if len(v) < MinValueBytes {
		return "", job.Wrap(job.CodeInvalidRequest, ErrTooShort, fmt.Sprintf("secret %s: its value is shorter than %d bytes, too short to scrub from the task's logs (it would be redacted from ordinary output everywhere); register a longer value", name, MinValueBytes))
	}
	return v, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
