package fsm

import (
	"strings"
	"testing"
)

// The invariant check (which Restore runs on every snapshot it reads)
// refuses lease indexes that disagree with the leases table: an entry for a
// lease that is not registered (a copy of its identity), one at the wrong
// expiry, one missing, or one too many.
func TestCheckRefusesBrokenLeaseIndexes(t *testing.T) {
	h := newHarness(t)
	h.ok(cNS("a"))
	h.ok(cSem("a", "s", 10))
	for i := 0; i < 20; i++ {
		h.ok(cLease("a", lid(i), "p", int64(10+i%3)))
		h.ok(cAcq("a", "s", lid(i), 1))
	}
	base := h.f.st
	if err := base.check(); err != nil {
		t.Fatalf("intact state: %v", err)
	}
	some := func(s *state) *leaseIdent { return s.identOf("a", lid(7)) }
	cases := map[string]func(s *state){
		"expiry entry for a copy of an ident": func(s *state) {
			li := some(s)
			s.expiry.Delete(expiryKey{at: li.liveExp, leaseIdent: li})
			cp := *li
			s.expiry.Set(expiryKey{at: li.liveExp, leaseIdent: &cp})
		},
		"expiry entry at another time": func(s *state) {
			li := some(s)
			s.expiry.Delete(expiryKey{at: li.liveExp, leaseIdent: li})
			s.expiry.Set(expiryKey{at: li.liveExp + 1, leaseIdent: li})
		},
		"expiry entry missing": func(s *state) {
			li := some(s)
			s.expiry.Delete(expiryKey{at: li.liveExp, leaseIdent: li})
		},
		"expiry entry twice": func(s *state) {
			li := some(s)
			s.expiry.Set(expiryKey{at: li.liveExp + 5, leaseIdent: li})
		},
		"process entry for a copy of an ident": func(s *state) {
			li := some(s)
			s.byProc.Delete(procKey{li})
			cp := *li
			s.byProc.Set(procKey{&cp})
		},
		"process entry missing": func(s *state) { s.byProc.Delete(procKey{some(s)}) },
	}
	for name, breakIt := range cases {
		s := base.clone()
		if err := s.check(); err != nil {
			t.Fatalf("%s: the clone is already inconsistent: %v", name, err)
		}
		breakIt(s)
		err := s.check()
		if err == nil || !strings.Contains(err.Error(), "index") {
			t.Errorf("%s: check gave %v, want an index error", name, err)
		}
	}
}
