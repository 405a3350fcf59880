package runner

// Rebind gives a sandbox opened before its user was known (a warm
// pool's, package session) the id its runs record from now on (their
// results' sandbox). Its workspace stays the directory it was opened
// over. Rebind is for a sandbox no run has used yet: the runs recorded
// before it name the old id.
func (s *Sandbox) Rebind(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.spec.ID = id
}
