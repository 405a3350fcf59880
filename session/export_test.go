package session

import "context"

// KillPooled deletes the backend sandbox of template name's first ready
// pooled sandbox and leaves it in the pool: a pooled sandbox that died.
func KillPooled(s *Service, name string) {
	s.mu.Lock()
	it := s.pools.byName[name].ready[0]
	s.mu.Unlock()
	it.sb.Close()
}

// CheckPooled runs the pools' liveness check now.
func CheckPooled(s *Service) { s.checkPooled(context.Background()) }

// BreakAudit closes live sandbox id's audit file under its log: the
// next line cannot be written.
func BreakAudit(s *Service, id string) { s.handle(id).audit.log.Close() }
