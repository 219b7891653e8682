package fsm

import (
	"encoding/base64"
	"math"
	"strconv"
	"strings"

	"github.com/tidwall/btree"

	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// Pagination bounds of docs/API.md, Pagination.
const (
	DefaultPageSize = 100
	MaxPageSize     = 250
)

func (n nsRec) view() *pb.Namespace {
	return &pb.Namespace{Name: n.name, Description: n.desc, Metadata: copyMetadata(n.md), Version: n.version,
		CreatedAt: n.createdAt, UpdatedAt: n.updatedAt}
}

func (l leaseRec) view() *pb.SemaphoreLease {
	return &pb.SemaphoreLease{LeaseId: l.id, ProcessId: l.proc, TtlSeconds: l.ttl, CreatedAt: l.createdAt, ExpiresAt: l.expiresAt}
}

func (s *state) semView(x semRec, now int64) *pb.Semaphore {
	holds, holders := s.effectiveHolds(x, now)
	return &pb.Semaphore{Name: x.name, Description: x.desc, Permits: x.permits, ActiveHolds: holds, ActiveHoldersCount: holders,
		Metadata: copyMetadata(x.md), Version: x.version, CreatedAt: x.createdAt, UpdatedAt: x.updatedAt, LastActivityAt: x.lastActivity}
}

// holderView is a stored hold's view. Its lease is h.lease (a stored hold's
// lease is in the table, see dropHolder), so it takes no search.
func holderView(h holderRec) *pb.SemaphoreHolder { return holderViewOf(h, h.lease.rec()) }

// holderViewOf is holderView for a hold whose lease the caller has at hand.
func holderViewOf(h holderRec, l leaseRec) *pb.SemaphoreHolder {
	return &pb.SemaphoreHolder{LeaseId: h.lease.id, ProcessId: l.proc, Weight: h.weight, LockedAt: h.lockedAt, ExpiresAt: l.expiresAt,
		FencingToken: h.token, Metadata: copyMetadata(h.md)}
}

// Page is one page of a List call.
type Page[T any] struct {
	Items    []T
	Next     string
	Previous string
}

// cursor is a decoded pagination token: a position, not a snapshot.
type cursor struct {
	backward bool   // the page ends just before key (else starts just after it)
	key      string // position key in the list's order
}

// Tokens carry the list kind, so that a token of one list is rejected by
// another instead of silently seeking to a meaningless place.
func encodeToken(kind string, backward bool, key string) string {
	dir := "f"
	if backward {
		dir = "b"
	}
	return base64.RawURLEncoding.EncodeToString([]byte(kind + "|" + dir + "|" + key))
}

func decodeToken(kind, tok string) (cursor, bool, *Error) {
	if tok == "" {
		return cursor{}, false, nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return cursor{}, false, invalidField("pagination_token", "malformed")
	}
	parts := strings.SplitN(string(raw), "|", 3)
	if len(parts) != 3 || parts[0] != kind || (parts[1] != "f" && parts[1] != "b") {
		return cursor{}, false, invalidField("pagination_token", "malformed or from another list")
	}
	return cursor{backward: parts[1] == "b", key: parts[2]}, true, nil
}

// ValidateLimit checks a page size: 0 means the default 100, else 1..250.
func ValidateLimit(limit int32) (int, error) {
	if limit == 0 {
		return DefaultPageSize, nil
	}
	if limit < 0 || limit > MaxPageSize {
		return 0, outOfRange("limit", 0, MaxPageSize, "must be 0 (default %d) or 1..%d, got %d", DefaultPageSize, MaxPageSize, limit)
	}
	return int(limit), nil
}

// listScope describes one List over a tree: the range it covers, how to
// turn a position key into a pivot, and which entries are visible now.
type listScope[T any] struct {
	kind    string
	tree    *btree.BTreeG[T]
	start   T                          // the first possible entry of the scope
	inScope func(T) bool               // false past the scope's end
	keyOf   func(T) string             // position key of an entry
	pivot   func(key string) (T, bool) // an entry placed at key
	visible func(T) bool               // false for entries to hide (expired)
}

// page walks the scope from a token. A forward page starts just after the
// cursor; a backward page ends just before it.
func (sc listScope[T]) page(limit int32, token string) (Page[T], *Error) {
	n, err := ValidateLimit(limit)
	if err != nil {
		return Page[T]{}, err.(*Error)
	}
	cur, has, perr := decodeToken(sc.kind, token)
	if perr != nil {
		return Page[T]{}, perr
	}
	var p Page[T]
	var pv T
	if has {
		var ok bool
		if pv, ok = sc.pivot(cur.key); !ok {
			return Page[T]{}, invalidField("pagination_token", "malformed position")
		}
	}
	if !has || !cur.backward {
		from := sc.start
		if has {
			from = pv
		}
		items := sc.walk(false, from, has, n+1)
		if len(items) > n {
			items = items[:n]
			p.Next = encodeToken(sc.kind, false, sc.keyOf(items[n-1]))
		}
		p.Items = items
		if has && len(sc.walk(true, pv, false, 1)) > 0 {
			// Something lies at or before the cursor: offer the way back.
			if len(items) > 0 {
				p.Previous = encodeToken(sc.kind, true, sc.keyOf(items[0]))
			} else {
				p.Previous = encodeToken(sc.kind, true, cur.key+"\x00")
			}
		}
		return p, nil
	}
	items := sc.walk(true, pv, true, n+1)
	if len(items) > n {
		items = items[:n]
	}
	more := len(items) == n && len(sc.walk(true, items[n-1], true, 1)) > 0
	for i, j := 0, len(items)-1; i < j; i, j = i+1, j-1 {
		items[i], items[j] = items[j], items[i]
	}
	p.Items = items
	if more {
		p.Previous = encodeToken(sc.kind, true, sc.keyOf(items[0]))
	}
	if len(sc.walk(false, pv, false, 1)) > 0 || (len(items) > 0 && len(sc.walk(false, items[len(items)-1], true, 1)) > 0) {
		if len(items) > 0 {
			p.Next = encodeToken(sc.kind, false, sc.keyOf(items[len(items)-1]))
		} else {
			p.Next = encodeToken(sc.kind, false, "")
		}
	}
	return p, nil
}

// walk collects up to n visible in-scope entries from `from` in one
// direction; exclusive skips an entry whose key equals from's.
func (sc listScope[T]) walk(backward bool, from T, exclusive bool, n int) []T {
	var out []T
	fromKey := sc.keyOf(from)
	visit := func(x T) bool {
		if !sc.inScope(x) {
			return false
		}
		if exclusive && sc.keyOf(x) == fromKey {
			return true
		}
		if sc.visible(x) {
			out = append(out, x)
		}
		return len(out) < n
	}
	if backward {
		sc.tree.Descend(from, visit)
	} else {
		sc.tree.Ascend(from, visit)
	}
	return out
}

func always[T any](T) bool { return true }

// ---- queries; each takes the reader's `now` and shows effective state ----

func (s *state) getNamespace(name string) (*pb.Namespace, *Error) {
	ns, ok := s.getNS(name)
	if !ok {
		return nil, namespaceNotFound(name)
	}
	return ns.view(), nil
}

func (s *state) listNamespaces(limit int32, token string) (Page[*pb.Namespace], *Error) {
	sc := listScope[nsRec]{kind: "ns", tree: s.namespaces.tree, start: nsRec{},
		inScope: always[nsRec], keyOf: func(n nsRec) string { return n.name },
		pivot: func(k string) (nsRec, bool) { return nsRec{name: k}, true }, visible: always[nsRec]}
	p, err := sc.page(limit, token)
	if err != nil {
		return Page[*pb.Namespace]{}, err
	}
	out := Page[*pb.Namespace]{Next: p.Next, Previous: p.Previous}
	for _, n := range p.Items {
		out.Items = append(out.Items, n.view())
	}
	return out, nil
}

func (s *state) getSemaphore(ns, name string, now int64) (*pb.Semaphore, *Error) {
	if _, ok := s.getNS(ns); !ok {
		return nil, namespaceNotFound(ns)
	}
	x, ok := s.getSem(ns, name)
	if !ok {
		return nil, semaphoreNotFound(ns, name)
	}
	return s.semView(x, now), nil
}

func (s *state) listSemaphores(ns string, limit int32, token string, now int64) (Page[*pb.Semaphore], *Error) {
	if _, ok := s.getNS(ns); !ok {
		return Page[*pb.Semaphore]{}, namespaceNotFound(ns)
	}
	sc := listScope[semRec]{kind: "sem", tree: s.semaphores.tree, start: semRec{ns: ns},
		inScope: func(x semRec) bool { return x.ns == ns }, keyOf: func(x semRec) string { return x.name },
		pivot: func(k string) (semRec, bool) { return semRec{ns: ns, name: k}, true }, visible: always[semRec]}
	p, err := sc.page(limit, token)
	if err != nil {
		return Page[*pb.Semaphore]{}, err
	}
	out := Page[*pb.Semaphore]{Next: p.Next, Previous: p.Previous}
	for _, x := range p.Items {
		out.Items = append(out.Items, s.semView(x, now))
	}
	return out, nil
}

func (s *state) listHolders(ns, sem string, limit int32, token string, now int64) (Page[*pb.SemaphoreHolder], *Error) {
	if _, err := s.getSemaphore(ns, sem, now); err != nil {
		return Page[*pb.SemaphoreHolder]{}, err
	}
	sc := listScope[*holderRec]{kind: "hold", tree: s.holders.tree, start: &holderRec{ns: ns, sem: sem},
		inScope: func(h *holderRec) bool { return h.ns == ns && h.sem == sem },
		keyOf:   func(h *holderRec) string { return strconv.FormatUint(h.seq, 10) },
		pivot: func(k string) (*holderRec, bool) {
			if k == "" {
				return &holderRec{ns: ns, sem: sem}, true
			}
			seq, err := strconv.ParseUint(strings.TrimSuffix(k, "\x00"), 10, 64)
			if strings.HasSuffix(k, "\x00") && seq < math.MaxUint64 {
				seq++ // "<seq>\x00" is the position just after seq (see page)
			}
			return &holderRec{ns: ns, sem: sem, seq: seq}, err == nil
		},
		visible: func(h *holderRec) bool { return h.lease.liveExp > now }}
	p, err := sc.page(limit, token)
	if err != nil {
		return Page[*pb.SemaphoreHolder]{}, err
	}
	out := Page[*pb.SemaphoreHolder]{Next: p.Next, Previous: p.Previous}
	for _, h := range p.Items {
		out.Items = append(out.Items, holderView(*h))
	}
	return out, nil
}

func (s *state) getLeaseView(ns, id string, now int64) (*pb.SemaphoreLease, *Error) {
	l, err := s.liveLease(ns, id, now)
	if err != nil {
		return nil, err
	}
	return l.view(), nil
}

func (s *state) liveLease(ns, id string, now int64) (leaseRec, *Error) {
	if _, ok := s.getNS(ns); !ok {
		return leaseRec{}, namespaceNotFound(ns)
	}
	l, ok := s.getLease(ns, id)
	if !ok || l.expiresAt <= now {
		return leaseRec{}, notFound(ReasonLeaseNotFound, "lease %q not found or expired in namespace %q", id, ns)
	}
	return l, nil
}

// listLeases pages through the leases of one kind (their ids start with
// prefix: semaphore leases "ls_", lock leases "ll_").
func (s *state) listLeases(ns, proc, prefix string, limit int32, token string, now int64) (Page[leaseRec], *Error) {
	if _, ok := s.getNS(ns); !ok {
		return Page[leaseRec]{}, namespaceNotFound(ns)
	}
	kind := "lease"
	if prefix == LockLeaseIDPrefix {
		kind = "locklease"
	}
	// The page's leases are kept as they are found (the process index's
	// entries carry the lease's ident), so that no id is searched again.
	// Ids of one kind share their prefix, so they are one range of each
	// tree (by (ns, id), and by (ns, proc, id) within a process).
	var ls []leaseRec
	var p Page[string]
	var err *Error
	if proc == "" {
		sc := listScope[leaseRec]{kind: kind, tree: s.leases.tree, start: leaseRec{leaseIdent: &leaseIdent{ns: ns, id: prefix}},
			inScope: func(l leaseRec) bool { return l.ns == ns && strings.HasPrefix(l.id, prefix) }, keyOf: func(l leaseRec) string { return l.id },
			pivot:   func(k string) (leaseRec, bool) { return leaseRec{leaseIdent: &leaseIdent{ns: ns, id: k}}, true },
			visible: func(l leaseRec) bool { return l.expiresAt > now }}
		var lp Page[leaseRec]
		lp, err = sc.page(limit, token)
		p = Page[string]{Next: lp.Next, Previous: lp.Previous}
		ls = lp.Items
	} else {
		sc := listScope[procKey]{kind: kind, tree: s.byProc, start: procKey{&leaseIdent{ns: ns, proc: proc, id: prefix}},
			inScope: func(k procKey) bool { return k.ns == ns && k.proc == proc && strings.HasPrefix(k.id, prefix) },
			keyOf:   func(k procKey) string { return k.id },
			pivot:   func(k string) (procKey, bool) { return procKey{&leaseIdent{ns: ns, proc: proc, id: k}}, true },
			visible: func(k procKey) bool { return k.liveExp > now }}
		var kp Page[procKey]
		kp, err = sc.page(limit, token)
		p = Page[string]{Next: kp.Next, Previous: kp.Previous}
		for _, k := range kp.Items {
			ls = append(ls, k.rec())
		}
	}
	if err != nil {
		return Page[leaseRec]{}, err
	}
	return Page[leaseRec]{Items: ls, Next: p.Next, Previous: p.Previous}, nil
}
