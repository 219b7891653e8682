package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/grackle-coord/grackle/bench"
)

// The lock workloads (locks, lockhandoff) use etcd's own recipe, the
// Mutex of go.etcd.io/etcd/client/v3/concurrency, unchanged: one
// concurrency.Session (a lease kept alive by clientv3 at TTL/3) per
// worker, one Mutex per lock name under <prefix>l/<name>/. The Mutex is
// first-come first-served: a contender's key, attached to its lease, is
// ordered by create revision, and a waiter watches the key just before
// its own for its delete.
//
// Costs, as etcd v3.5's Mutex does it: an uncontended Lock is one txn (1
// commit); a contended one is that txn, then a range for the key before
// it, a watch until that key's delete, the range again, and a range of
// its own key (checking its session did not expire meanwhile); Unlock is
// one delete (1 commit).

// NewLockSession opens a concurrency.Session on worker w's client.
func (e *Etcd) NewLockSession(ctx context.Context, w int, ttl time.Duration) (bench.LockSession, error) {
	s, err := concurrency.NewSession(e.cl(w), concurrency.WithTTL(int(ttl/time.Second)))
	if err != nil {
		return nil, err
	}
	return &lockSession{e: e, s: s, mutexes: map[string]*concurrency.Mutex{}}, nil
}

type lockSession struct {
	e       *Etcd
	s       *concurrency.Session
	mu      sync.Mutex
	mutexes map[string]*concurrency.Mutex
}

// mutex returns the session's Mutex of a lock name, made on first use (a
// Mutex keeps its own key between Lock and Unlock).
func (l *lockSession) mutex(name string) *concurrency.Mutex {
	l.mu.Lock()
	defer l.mu.Unlock()
	m, ok := l.mutexes[name]
	if !ok {
		m = concurrency.NewMutex(l.s, l.e.prefix+"l/"+name)
		l.mutexes[name] = m
	}
	return m
}

// Lock is Mutex.TryLock for timeout 0 (the locks workload: on a lock
// nobody else takes, TryLock and Lock are the same single txn) and
// Mutex.Lock bounded by the timeout otherwise.
func (l *lockSession) Lock(ctx context.Context, name string, timeout time.Duration) (bench.Grant, error) {
	m := l.mutex(name)
	if timeout <= 0 {
		if err := m.TryLock(ctx); err != nil {
			return bench.Grant{}, err
		}
	} else {
		lctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		if err := m.Lock(lctx); err != nil {
			return bench.Grant{}, err
		}
	}
	// The header of the response that granted the lock: the txn's when
	// the lock was free, else the final range's, read after the delete
	// that freed it. Either is later than the previous holder's grant
	// and at or after its release, so revisions order the grants of one
	// lock. The lease's expiry is not known here (no workload on locks
	// needs it).
	return bench.Grant{Based: uint64(m.Header().Revision)}, nil
}

// Unlock is Mutex.Unlock: one delete of the session's key, which does not
// say whether the key was there.
func (l *lockSession) Unlock(ctx context.Context, name string) error {
	return l.mutex(name).Unlock(ctx)
}

func (l *lockSession) Touch(ctx context.Context) error {
	_, err := l.s.Client().Put(ctx, l.e.prefix+fmt.Sprintf("touch/%016x", int64(l.s.Lease())), "")
	return err
}

// Close revokes the session's lease (concurrency.Session.Close bounds the
// revoke by the TTL, not by ctx).
func (l *lockSession) Close(ctx context.Context) error {
	return l.s.Close()
}
