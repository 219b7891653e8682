package main

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	recipe "go.etcd.io/etcd/client/v3/experimental/recipes"

	"github.com/grackle-coord/grackle/bench"
)

// The wait-group and barrier workloads on etcd.
//
// Wait groups: etcd has no recipe, so this is the obvious equivalent,
// under <prefix>w/<group>/:
//
//	counter      the number of jobs, put at creation (1 commit)
//	j/<job id>   one key per completed job; a batch is one txn of puts
//	             (1 commit; idempotent per job id: a put of a key that
//	             exists changes no count)
//
// The waiter reads the counter and counts the job keys in one txn, and
// unless they are enough, watches the j/ prefix from the next revision,
// counting the puts that create a key, until they are. Deleting the group
// is one delete of the prefix. What it does not do that Grackle does:
// refuse jobs past the counter (all or none), expire, list the jobs in
// order with their completion times from the leader's clock.
//
// Barriers: etcd's own recipe, unchanged: the DoubleBarrier of
// go.etcd.io/etcd/client/v3/experimental/recipes (its Barrier is a gate
// that one process holds and releases, not a count of arrivals). One
// concurrency.Session per process; round r is Enter on a barrier of its
// own key, <prefix>b/<name>/<r>: a DoubleBarrier is reusable only after
// every process has called Leave, a chain of watches in which each
// process waits for the others to delete their keys, which a cyclic
// barrier does not need. Enter costs a range, a txn putting the process's
// key (1 commit), a second range; the last process to enter puts
// <key>/ready (1 commit), the others watch for it. Enter takes no context:
// it cannot be cancelled.

func (e *Etcd) wgKey(name, rest string) string { return e.prefix + "w/" + name + "/" + rest }

func (e *Etcd) CreateWaitGroup(ctx context.Context, w int, name string, counter int64) error {
	_, err := e.cl(w).Put(ctx, e.wgKey(name, "counter"), strconv.FormatInt(counter, 10))
	return err
}

func (e *Etcd) CompleteJobs(ctx context.Context, w int, name string, jobs []string) error {
	ops := make([]clientv3.Op, len(jobs))
	for i, j := range jobs {
		ops[i] = clientv3.OpPut(e.wgKey(name, "j/"+j), "")
	}
	_, err := e.cl(w).Txn(ctx).Then(ops...).Commit()
	return err
}

// WaitWaitGroup: count, then watch and count the creates.
func (e *Etcd) WaitWaitGroup(ctx context.Context, w int, name string) error {
	cl := e.cl(w)
	jobs := e.wgKey(name, "j/")
	r, err := cl.Txn(ctx).Then(clientv3.OpGet(e.wgKey(name, "counter")), clientv3.OpGet(jobs, clientv3.WithPrefix(), clientv3.WithCountOnly())).Commit()
	if err != nil {
		return err
	}
	kvs := r.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 {
		return fmt.Errorf("wait group %s: no counter", name)
	}
	counter, err := strconv.ParseInt(string(kvs[0].Value), 10, 64)
	if err != nil {
		return err
	}
	n := r.Responses[1].GetResponseRange().Count
	if n >= counter {
		return nil
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for wr := range cl.Watch(clientv3.WithRequireLeader(wctx), jobs, clientv3.WithPrefix(),
		clientv3.WithRev(r.Header.Revision+1), clientv3.WithFilterDelete()) {
		if err := wr.Err(); err != nil {
			return err
		}
		for _, ev := range wr.Events {
			if ev.IsCreate() {
				n++
			}
		}
		if n >= counter {
			return nil
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fmt.Errorf("wait group %s: watch ended", name)
}

func (e *Etcd) DeleteWaitGroup(ctx context.Context, w int, name string) error {
	_, err := e.cl(w).Delete(ctx, e.wgKey(name, ""), clientv3.WithPrefix())
	return err
}

// NewBarrier opens one concurrency.Session per process (TTL 60 s, kept
// alive by clientv3), on the process's client.
func (e *Etcd) NewBarrier(ctx context.Context, name string, parties int) (bench.Barrier, error) {
	b := &etcdBarrier{e: e, key: e.prefix + "b/" + name + "/", parties: parties, sessions: make([]*concurrency.Session, parties), byLease: map[clientv3.LeaseID]int{}}
	var wg sync.WaitGroup
	errs := make([]error, parties)
	for w := 0; w < parties; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			b.sessions[w], errs[w] = concurrency.NewSession(e.cl(w), concurrency.WithTTL(60), concurrency.WithContext(context.WithoutCancel(ctx)))
		}(w)
	}
	wg.Wait()
	for w, err := range errs {
		if err != nil {
			_ = b.Close(ctx)
			return nil, err
		}
		b.byLease[b.sessions[w].Lease()] = w
	}
	return b, nil
}

type etcdBarrier struct {
	e        *Etcd
	key      string
	parties  int
	sessions []*concurrency.Session
	byLease  map[clientv3.LeaseID]int
}

func (b *etcdBarrier) roundKey(round int64) string { return fmt.Sprintf("%s%08d", b.key, round) }

// Meet is DoubleBarrier.Enter; it cannot tell which process was last.
func (b *etcdBarrier) Meet(ctx context.Context, w int, round int64) (time.Time, bool, bool, error) {
	if err := ctx.Err(); err != nil {
		return time.Time{}, false, false, err
	}
	err := recipe.NewDoubleBarrier(b.sessions[w], b.roundKey(round), b.parties).Enter()
	return time.Time{}, false, false, err
}

// LastArrival: the process whose key under <round>/waiters was created
// last, the one whose Enter put <round>/ready (keys are attached to
// their session's lease).
func (b *etcdBarrier) LastArrival(ctx context.Context, round int64) (int, error) {
	r, err := b.e.status.Get(ctx, b.roundKey(round)+"/waiters", clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		return 0, err
	}
	if len(r.Kvs) < b.parties {
		return 0, fmt.Errorf("round %d: %d of %d processes entered", round, len(r.Kvs), b.parties)
	}
	w, ok := b.byLease[clientv3.LeaseID(r.Kvs[b.parties-1].Lease)]
	if !ok {
		return 0, fmt.Errorf("round %d: the last key's lease %x is no process's", round, r.Kvs[b.parties-1].Lease)
	}
	return w, nil
}

// Close ends the sessions (revoking their leases deletes the waiters'
// keys); Cleanup deletes the rest of the run's prefix.
func (b *etcdBarrier) Close(ctx context.Context) error {
	var first error
	for _, s := range b.sessions {
		if s != nil {
			if err := s.Close(); err != nil && first == nil {
				first = err
			}
		}
	}
	return first
}
