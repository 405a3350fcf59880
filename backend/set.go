package backend

import (
	"log/slog"
	"sort"
)

// Set is the backends one process runs, by kind: built once with the
// operator's Config (cmd builds it from the flags) and handed to whatever
// runs or inspects jobs, so that every part of the process uses the same
// configured instance of a kind.
type Set map[string]Backend

// NewSet builds every registered kind with cfg.
func NewSet(cfg Config) (Set, error) {
	s := Set{}
	for _, kind := range Kinds() {
		b, err := New(kind, cfg)
		if err != nil {
			return nil, err
		}
		s[kind] = b
	}
	return s, nil
}

// Kinds lists the set's kinds in sorted order.
func (s Set) Kinds() []string {
	kinds := make([]string, 0, len(s))
	for k := range s {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	return kinds
}

// Filter returns the backends of s that keep accepts.
func (s Set) Filter(keep func(Backend) bool) Set {
	out := Set{}
	for k, b := range s {
		if keep(b) {
			out[k] = b
		}
	}
	return out
}

// LogValue logs a set as its kinds.
func (s Set) LogValue() slog.Value { return slog.AnyValue(s.Kinds()) }

// Defaults is the Set of every registered kind's default instance
// (Lookup): for a process that takes no backend configuration.
func Defaults() Set {
	s := Set{}
	for _, kind := range Kinds() {
		if b, ok := Lookup(kind); ok {
			s[kind] = b
		}
	}
	return s
}
