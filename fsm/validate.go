package fsm

import (
	"fmt"

	"unicode/utf8"

	fsmpb "github.com/grackle-coord/grackle/proto/grackle/fsm/v1"
)

// Bounds of docs/API.md, Names and text.
const (
	MaxNameBytes        = 128
	MaxProcessIDBytes   = 128
	MaxDescriptionBytes = 1024
	MaxMetadataEntries  = 32
	MaxMetadataKeyBytes = 128
	MaxMetadataValBytes = 256
	LeaseIDPrefix       = "ls_"
	LockLeaseIDPrefix   = "ll_"
	MaxLockNameBytes    = 256
	MinLeaseIDRandom    = 20
	MaxLeaseIDBytes     = 64
)

// Limits are the server limits of docs/API.md, Limits. They are replicated state (the
// SetLimits command), so every node enforces the same numbers.
type Limits struct {
	MaxNamespaces             int64
	MaxSemaphoresPerNamespace int64
	MaxLeasesPerNamespace     int64
	MaxHoldersPerSemaphore    int64
	MaxPermits                int64
	MaxTTLSeconds             int64
	MaxLocksPerNamespace      int64
	MaxLockLeasesPerNamespace int64
	MaxHoldersPerLock         int64
	MaxWaitGroupsPerNamespace int64
	MaxBarriersPerNamespace   int64
	MaxWaitGroupCounter       int64
	MaxBarrierProcesses       int64
	MaxJobsPerCall            int64
	// MaxStateBytes bounds the state's accounted size (quota.go); 0 or
	// negative: no bound. Unlike the others it is not defaulted: a leader
	// or snapshot that predates it (0) leaves the state unbounded.
	MaxStateBytes int64
}

// DefaultLimits are the defaults of docs/API.md, Limits.
func DefaultLimits() Limits {
	return Limits{
		MaxNamespaces:             100_000,
		MaxSemaphoresPerNamespace: 1_000_000,
		MaxLeasesPerNamespace:     1_000_000,
		MaxHoldersPerSemaphore:    10_000,
		MaxPermits:                1_000_000_000,
		MaxTTLSeconds:             300,
		MaxLocksPerNamespace:      1_000_000,
		MaxLockLeasesPerNamespace: 1_000_000,
		MaxHoldersPerLock:         10_000,
		MaxWaitGroupsPerNamespace: 1_000_000,
		MaxBarriersPerNamespace:   1_000_000,
		MaxWaitGroupCounter:       1_000_000,
		MaxBarrierProcesses:       100_000,
		MaxJobsPerCall:            100,
	}
}

// defaultLockLimits fills lock limits left at 0 (a SetLimits of a leader
// or a snapshot that predates locks) with their defaults.
func (l *Limits) defaultLockLimits() {
	d := DefaultLimits()
	if l.MaxLocksPerNamespace == 0 {
		l.MaxLocksPerNamespace = d.MaxLocksPerNamespace
	}
	if l.MaxLockLeasesPerNamespace == 0 {
		l.MaxLockLeasesPerNamespace = d.MaxLockLeasesPerNamespace
	}
	if l.MaxHoldersPerLock == 0 {
		l.MaxHoldersPerLock = d.MaxHoldersPerLock
	}
	for _, f := range []struct{ v, d *int64 }{
		{&l.MaxWaitGroupsPerNamespace, &d.MaxWaitGroupsPerNamespace}, {&l.MaxBarriersPerNamespace, &d.MaxBarriersPerNamespace},
		{&l.MaxWaitGroupCounter, &d.MaxWaitGroupCounter}, {&l.MaxBarrierProcesses, &d.MaxBarrierProcesses},
		{&l.MaxJobsPerCall, &d.MaxJobsPerCall},
	} {
		if *f.v == 0 {
			*f.v = *f.d
		}
	}
}

// LimitsCommand is the SetLimits command that makes l the replicated limits.
func LimitsCommand(l Limits) *fsmpb.SetLimits {
	return &fsmpb.SetLimits{MaxNamespaces: l.MaxNamespaces, MaxSemaphoresPerNamespace: l.MaxSemaphoresPerNamespace,
		MaxLeasesPerNamespace: l.MaxLeasesPerNamespace, MaxHoldersPerSemaphore: l.MaxHoldersPerSemaphore,
		MaxPermits: l.MaxPermits, MaxTtlSeconds: l.MaxTTLSeconds, MaxLocksPerNamespace: l.MaxLocksPerNamespace,
		MaxLockLeasesPerNamespace: l.MaxLockLeasesPerNamespace, MaxHoldersPerLock: l.MaxHoldersPerLock,
		MaxWaitGroupsPerNamespace: l.MaxWaitGroupsPerNamespace, MaxBarriersPerNamespace: l.MaxBarriersPerNamespace,
		MaxWaitGroupCounter: l.MaxWaitGroupCounter, MaxBarrierProcesses: l.MaxBarrierProcesses, MaxJobsPerCall: l.MaxJobsPerCall,
		MaxStateBytes: l.MaxStateBytes}
}

// limitsFrom reads a SetLimits command (or snapshot meta), with the limits
// it leaves at 0 (a leader or snapshot older than them) at their defaults.
func limitsFrom(c *fsmpb.SetLimits) Limits {
	l := Limits{
		MaxNamespaces: c.MaxNamespaces, MaxSemaphoresPerNamespace: c.MaxSemaphoresPerNamespace,
		MaxLeasesPerNamespace: c.MaxLeasesPerNamespace, MaxHoldersPerSemaphore: c.MaxHoldersPerSemaphore,
		MaxPermits: c.MaxPermits, MaxTTLSeconds: c.MaxTtlSeconds,
		MaxLocksPerNamespace: c.MaxLocksPerNamespace, MaxLockLeasesPerNamespace: c.MaxLockLeasesPerNamespace,
		MaxHoldersPerLock: c.MaxHoldersPerLock, MaxWaitGroupsPerNamespace: c.MaxWaitGroupsPerNamespace,
		MaxBarriersPerNamespace: c.MaxBarriersPerNamespace, MaxWaitGroupCounter: c.MaxWaitGroupCounter,
		MaxBarrierProcesses: c.MaxBarrierProcesses, MaxJobsPerCall: c.MaxJobsPerCall,
		MaxStateBytes: c.MaxStateBytes,
	}
	l.defaultLockLimits()
	return l
}

// WithLockDefaults returns l with unset (0) lock limits at their defaults.
func (l Limits) WithLockDefaults() Limits {
	l.defaultLockLimits()
	return l
}

// Validate reports a limit that is not positive.
func (l Limits) Validate() error {
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"max_namespaces", l.MaxNamespaces}, {"max_semaphores_per_namespace", l.MaxSemaphoresPerNamespace},
		{"max_leases_per_namespace", l.MaxLeasesPerNamespace}, {"max_holders_per_semaphore", l.MaxHoldersPerSemaphore},
		{"max_permits", l.MaxPermits}, {"max_ttl_seconds", l.MaxTTLSeconds},
		{"max_locks_per_namespace", l.MaxLocksPerNamespace}, {"max_lock_leases_per_namespace", l.MaxLockLeasesPerNamespace},
		{"max_holders_per_lock", l.MaxHoldersPerLock},
		{"max_wait_groups_per_namespace", l.MaxWaitGroupsPerNamespace}, {"max_barriers_per_namespace", l.MaxBarriersPerNamespace},
		{"max_wait_group_counter", l.MaxWaitGroupCounter}, {"max_barrier_processes", l.MaxBarrierProcesses},
		{"max_jobs_per_call", l.MaxJobsPerCall},
	} {
		if f.v < 1 {
			return invalid("%s: must be >= 1, got %d", f.name, f.v)
		}
	}
	if l.MaxPermits > MaxPermitsCeiling {
		return invalid("max_permits: must be at most %d, got %d", MaxPermitsCeiling, l.MaxPermits)
	}
	return nil
}

func isNameByte(c byte) bool {
	return c == '-' || c == '_' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func isBase62(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

// ValidateName checks a namespace or semaphore name: 1..128 bytes of
// [-_0-9a-zA-Z]. field names the request field in the error.
func ValidateName(field, v string) error {
	if len(v) < 1 || len(v) > MaxNameBytes {
		return invalidField(field, "must be 1..%d bytes, got %d", MaxNameBytes, len(v))
	}
	for i := 0; i < len(v); i++ {
		if !isNameByte(v[i]) {
			return invalidField(field, "may contain only [-_0-9a-zA-Z], found %q at byte %d", v[i], i)
		}
	}
	return nil
}

// ValidateProcessID checks process_id: 1..128 bytes of printable UTF-8.
func ValidateProcessID(field, v string) error {
	if len(v) < 1 || len(v) > MaxProcessIDBytes {
		return invalidField(field, "must be 1..%d bytes, got %d", MaxProcessIDBytes, len(v))
	}
	if err := printableUTF8(field, v); err != nil {
		return err
	}
	return nil
}

// printableUTF8 checks that v is valid UTF-8 without control characters.
func printableUTF8(field, v string) *Error {
	if !utf8.ValidString(v) {
		return invalidField(field, "must be valid UTF-8")
	}
	for i, r := range v {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return invalidField(field, "must be printable, found control character %U at byte %d", r, i)
		}
	}
	return nil
}

// ValidateDescription checks a description: at most 1024 bytes of UTF-8.
func ValidateDescription(field, v string) error {
	if len(v) > MaxDescriptionBytes {
		return invalidField(field, "must be at most %d bytes, got %d", MaxDescriptionBytes, len(v))
	}
	if !utf8.ValidString(v) {
		return invalidField(field, "must be valid UTF-8")
	}
	return nil
}

// ValidateMetadata checks a metadata map: at most 32 entries, keys 1..128
// bytes, values at most 256 bytes, all valid UTF-8.
func ValidateMetadata(field string, md map[string]string) error {
	if len(md) > MaxMetadataEntries {
		return invalidField(field, "at most %d entries, got %d", MaxMetadataEntries, len(md))
	}
	for _, k := range sortedKeys(md) {
		v := md[k]
		if len(k) < 1 || len(k) > MaxMetadataKeyBytes {
			return invalidField(field, "keys must be 1..%d bytes, got a key of %d bytes", MaxMetadataKeyBytes, len(k))
		}
		if len(v) > MaxMetadataValBytes {
			e := invalid("%s[%q]: values must be at most %d bytes, got %d", field, k, MaxMetadataValBytes, len(v))
			e.Field = field
			return e
		}
		// The API's decoder refuses invalid UTF-8; a Raft entry or a
		// snapshot record did not go through it.
		if !utf8.ValidString(k) {
			return invalidField(field, "keys must be valid UTF-8")
		}
		if !utf8.ValidString(v) {
			e := invalid("%s[%q]: values must be valid UTF-8", field, k)
			e.Field = field
			return e
		}
	}
	return nil
}

// ValidateLeaseID checks the shape of a semaphore lease id: "ls_" and at
// least 20 base62 characters (at most 64 bytes in all).
func ValidateLeaseID(field, v string) error { return validateLeaseID(field, v, LeaseIDPrefix) }

// ValidateLockLeaseID checks the shape of a lock lease id: "ll_" and at
// least 20 base62 characters (at most 64 bytes in all).
func ValidateLockLeaseID(field, v string) error { return validateLeaseID(field, v, LockLeaseIDPrefix) }

// ValidateAnyLeaseID accepts the id of a lease of either kind.
func ValidateAnyLeaseID(field, v string) error {
	if IsLockLeaseID(v) {
		return ValidateLockLeaseID(field, v)
	}
	return ValidateLeaseID(field, v)
}

// IsLockLeaseID says whether an id names a lock lease (by its prefix).
func IsLockLeaseID(v string) bool { return len(v) >= 3 && v[:3] == LockLeaseIDPrefix }

// isLeaseID reports whether validateLeaseID(_, v, prefix) would pass.
func isLeaseID(v, prefix string) bool {
	if len(v) < len(prefix)+MinLeaseIDRandom || len(v) > MaxLeaseIDBytes || v[:len(prefix)] != prefix {
		return false
	}
	for i := len(prefix); i < len(v); i++ {
		if !isBase62(v[i]) {
			return false
		}
	}
	return true
}

func validateLeaseID(field, v, prefix string) error {
	if len(v) < len(prefix)+MinLeaseIDRandom || len(v) > MaxLeaseIDBytes || v[:len(prefix)] != prefix {
		return invalidField(field, "must be %q followed by %d..%d base62 characters, got %q", prefix, MinLeaseIDRandom, MaxLeaseIDBytes-len(prefix), truncate(v, 80))
	}
	for i := len(prefix); i < len(v); i++ {
		if !isBase62(v[i]) {
			return invalidField(field, "must be %q followed by base62 characters, found %q at byte %d", prefix, v[i], i)
		}
	}
	return nil
}

// ValidateLockName checks a lock name: 1..256 bytes, segments of
// [-_0-9a-zA-Z]+ joined by '/' (no empty segment: not "a//b", "/a", "a/").
func ValidateLockName(field, v string) error {
	if len(v) < 1 || len(v) > MaxLockNameBytes {
		return invalidField(field, "must be 1..%d bytes, got %d", MaxLockNameBytes, len(v))
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c == '/' {
			if i == 0 || i == len(v)-1 || v[i-1] == '/' {
				return invalidField(field, "empty path segment at byte %d (a lock name is segments of [-_0-9a-zA-Z] joined by '/')", i)
			}
			continue
		}
		if !isNameByte(c) {
			return invalidField(field, "may contain only [-_0-9a-zA-Z] and '/' between segments, found %q at byte %d", c, i)
		}
	}
	return nil
}

// ValidatePermits checks permits: 1..max.
func ValidatePermits(field string, v, max int64) error {
	if v < 1 || v > max {
		return outOfRange(field, 1, max, "must be 1..%d, got %d", max, v)
	}
	return nil
}

// ValidateTTL checks ttl_seconds: 1..max.
func ValidateTTL(field string, v, max int64) error {
	if v < 1 || v > max {
		return outOfRange(field, 1, max, "must be 1..%d, got %d", max, v)
	}
	return nil
}

// ValidateWeight checks an acquire weight (>= 1).
func ValidateWeight(field string, v int64) error {
	if v < 1 {
		return outOfRange(field, 1, noMax, "must be >= 1, got %d", v)
	}
	return nil
}

// ValidateExpectedVersion checks expected_version (>= 1).
func ValidateExpectedVersion(field string, v int64) error {
	if v < 1 {
		return outOfRange(field, 1, noMax, "must be >= 1, got %d", v)
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return fmt.Sprintf("%s...(%d bytes)", s[:n], len(s))
}

// ValidateLeaseKind checks the lease id of a call that needs a lease of one
// kind (lock: a lock lease). A well-formed id of the other kind is
// NotFound (LEASE_NOT_FOUND), naming the kind the call needs: the two kinds
// are not interchangeable. Any other bad id is InvalidArgument.
func ValidateLeaseKind(field, id string, lock bool) error {
	// isLeaseID, not the validators: their error, built and dropped on
	// every valid call, was 5 % of the bytes a leader allocated per pair.
	if lock && isLeaseID(id, LeaseIDPrefix) {
		return notFound(ReasonLeaseNotFound, "%s: %q is a semaphore lease; lock calls need a lock lease (%q...), from CreateLockLease", field, id, LockLeaseIDPrefix)
	}
	if !lock && isLeaseID(id, LockLeaseIDPrefix) {
		return notFound(ReasonLeaseNotFound, "%s: %q is a lock lease; semaphore calls need a semaphore lease (%q...), from CreateSemaphoreLease", field, id, LeaseIDPrefix)
	}
	if lock {
		return ValidateLockLeaseID(field, id)
	}
	return ValidateLeaseID(field, id)
}
