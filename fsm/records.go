package fsm

import (
	"fmt"
	"slices"
)

// Record checks: what every stored record must satisfy, whatever wrote it.
// Restore runs them on each record as it reads a snapshot (a snapshot is
// untrusted: a file from a backup, or bytes from a leader), and check (the
// invariant checker of tests and of backup inspection) runs them on every
// record of a state, so a state the fuzzer reaches through Apply and a state
// read from a snapshot answer to the same rules. They check what the API
// would have refused (names, strings, bounds) and what the state machine
// itself guarantees (versions, tokens, sums); the checks that need other
// tables (a holder's lease exists, counts agree) are where the tables meet.
//
// Bounds that the replicated limits set (max_permits, max_ttl_seconds,
// counts) are not checked against the limits in force: the limits may have
// been lowered after a record was made, and a backup that cannot be
// restored is worse than a record above today's limit. Records are checked
// against the absolute bounds instead (MaxPermitsCeiling, >= 1, no
// overflow).

// MaxPermitsCeiling bounds --max-permits, and so every semaphore's permits:
// at 2^62, the sum of two weights of holds on one semaphore (each at most
// its permits) cannot overflow an int64.
const MaxPermitsCeiling = int64(1) << 62

// MaxMemberFieldBytes bounds a member record's node id and addresses.
const MaxMemberFieldBytes = 256

func checkNSRecord(n nsRec) error {
	if err := firstErr(ValidateName("name", n.name), ValidateDescription("description", n.desc),
		ValidateMetadata("metadata", n.md)); err != nil {
		return fmt.Errorf("namespace %q: %s", n.name, err.Msg)
	}
	if n.version < 1 {
		return fmt.Errorf("namespace %q: version %d, must be >= 1", n.name, n.version)
	}
	return nil
}

func semLabel(ns, name string) string { return fmt.Sprintf("%q", ns+"/"+name) }

func checkSemRecord(x semRec) error {
	if err := firstErr(ValidateName("name", x.name), ValidateDescription("description", x.desc),
		ValidatePermits("permits", x.permits, MaxPermitsCeiling), ValidateMetadata("metadata", x.md)); err != nil {
		return fmt.Errorf("semaphore %s: %s", semLabel(x.ns, x.name), err.Msg)
	}
	if x.version < 1 {
		return fmt.Errorf("semaphore %s: version %d, must be >= 1", semLabel(x.ns, x.name), x.version)
	}
	return nil
}

// checkLeaseRecord checks a lease's own fields (its namespace is checked
// where it is looked up).
func checkLeaseRecord(ns, id, proc string, ttl, createdAt, expiresAt int64, md map[string]string) error {
	if err := firstErr(ValidateAnyLeaseID("lease_id", id), ValidateProcessID("process_id", proc),
		ValidateMetadata("metadata", md)); err != nil {
		return fmt.Errorf("lease %q: %s", ns+"/"+truncate(id, 80), err.Msg)
	}
	if ttl < 1 {
		return fmt.Errorf("lease %q: ttl_seconds %d, must be >= 1", ns+"/"+id, ttl)
	}
	if expiresAt < createdAt {
		return fmt.Errorf("lease %q: expires_at %d before created_at %d", ns+"/"+id, expiresAt, createdAt)
	}
	if !IsLockLeaseID(id) && len(md) > 0 {
		return fmt.Errorf("lease %q: a semaphore lease carries no metadata", ns+"/"+id)
	}
	return nil
}

// checkHoldFields checks what a semaphore hold and a lock hold share: a
// sequence number and a fencing token within the state's counters (and
// not 0: both start at 1), valid metadata. The caller names the hold.
func checkHoldFields(seq, token, holdSeq, lastToken uint64, md map[string]string) error {
	if seq < 1 || seq > holdSeq {
		return fmt.Errorf("sequence %d outside 1..%d", seq, holdSeq)
	}
	if token < 1 || token > lastToken {
		return fmt.Errorf("fencing token %d outside 1..%d", token, lastToken)
	}
	if err := ValidateMetadata("metadata", md); err != nil {
		return fmt.Errorf("%s", err.(*Error).Msg)
	}
	return nil
}

// holdSum adds a holder's weight to the weights summed so far on a
// semaphore, refusing a weight below 1, a sum that overflows and a sum
// above the permits.
func holdSum(sem semRec, sum, weight int64) (int64, error) {
	switch {
	case weight < 1:
		return 0, fmt.Errorf("semaphore %s: a holder has weight %d, must be >= 1", semLabel(sem.ns, sem.name), weight)
	case sum > maxInt64-weight:
		return 0, fmt.Errorf("semaphore %s: holder weights sum overflows", semLabel(sem.ns, sem.name))
	case sum+weight > sem.permits:
		return 0, fmt.Errorf("semaphore %s: holder weights sum to %d, above its %d permits", semLabel(sem.ns, sem.name), sum+weight, sem.permits)
	}
	return sum + weight, nil
}

const maxInt64 = int64(^uint64(0) >> 1)

// tokenSet finds a fencing token used twice among the holds of one
// semaphore or lock: the holds are read in sequence order, their tokens in
// no particular order, so the group's tokens are sorted when it ends.
type tokenSet struct{ tokens []uint64 }

func (t *tokenSet) reset() { t.tokens = t.tokens[:0] }

func (t *tokenSet) add(token uint64) { t.tokens = append(t.tokens, token) }

// duplicate returns a token held twice, if any.
func (t *tokenSet) duplicate() (uint64, bool) {
	if len(t.tokens) < 2 {
		return 0, false
	}
	slices.Sort(t.tokens)
	for i := 1; i < len(t.tokens); i++ {
		if t.tokens[i] == t.tokens[i-1] {
			return t.tokens[i], true
		}
	}
	return 0, false
}

func checkMemberRecord(m memberRec) error {
	if m.id == "" {
		return fmt.Errorf("member: empty node id")
	}
	for _, f := range []struct{ name, v string }{{"node_id", m.id}, {"raft_address", m.raftAddr}, {"grpc_address", m.grpcAddr}} {
		if err := validateMemberField(f.name, f.v); err != nil {
			return fmt.Errorf("member %q: %s", truncate(m.id, 80), err.Msg)
		}
	}
	return nil
}

// validateMemberField checks a member's node id or address: at most 256
// bytes of printable UTF-8 (an address is host:port; the id is the
// operator's --node-id).
func validateMemberField(field, v string) *Error {
	if len(v) > MaxMemberFieldBytes {
		return invalidField(field, "must be at most %d bytes, got %d", MaxMemberFieldBytes, len(v))
	}
	return printableUTF8(field, v)
}
