package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/grackle-coord/grackle/bench"
)

// The recipe: a weighted, FIFO semaphore owned by leases, the way etcd's
// concurrency package builds its Mutex (a key per contender, attached to
// its lease, ordered by create revision, waiters watching for deletes),
// generalized to permits. Everything lives under <prefix>s/<name>/:
//
//	permits         the semaphore's permits
//	q/<lease hex>   one contender, value = its weight, attached to its lease
//
// A contender holds its weight once the weights of every key created
// before its own plus its own fit in the permits (so grants are strictly
// FIFO). Acquire is one txn: put the key if absent and, in the same
// revision, read the permits and the queue; a contender that does not fit
// watches the queue for deletes from the next revision and decides from
// the events alone. Release is one delete. A holder whose lease expires
// loses its key with the lease, so the permits come back by themselves
// (a counter key kept beside the holders would leak them).
//
// Costs: an uncontended acquire or release is 1 request and 1 Raft
// commit; a contended acquire is 1 txn plus 1 watch; lease grant and
// revoke are 1 commit each.
type Etcd struct {
	clients []*clientv3.Client
	status  *clientv3.Client
	leader  string // the leader's endpoint, asked for the Raft index
	prefix  string
}

func (e *Etcd) cl(w int) *clientv3.Client { return e.clients[w%len(e.clients)] }

func (e *Etcd) semKey(name, rest string) string { return e.prefix + "s/" + name + "/" + rest }

// Setup names the run's key prefix.
func (e *Etcd) Setup(ctx context.Context, runID string) error {
	e.prefix = "/grackle-bench/" + runID + "/"
	return nil
}

// Cleanup deletes the run's keys and compacts the history up to now, so
// runs do not slow down with an ever larger database.
func (e *Etcd) Cleanup(ctx context.Context) error {
	r, err := e.status.Delete(ctx, e.prefix, clientv3.WithPrefix())
	if err != nil {
		return err
	}
	_, err = e.status.Compact(ctx, r.Header.Revision)
	return err
}

func (e *Etcd) CreateSemaphore(ctx context.Context, name string, permits int64) error {
	_, err := e.status.Put(ctx, e.semKey(name, "permits"), strconv.FormatInt(permits, 10))
	return err
}

// Read is a linearizable (the client's default) range over the semaphore.
func (e *Etcd) Read(ctx context.Context, w int, sem string) error {
	_, err := e.cl(w).Get(ctx, e.semKey(sem, ""), clientv3.WithPrefix())
	return err
}

func (e *Etcd) CommitIndex(ctx context.Context) (uint64, error) {
	st, err := e.status.Status(ctx, e.leader)
	if err != nil {
		return 0, err
	}
	return st.RaftIndex, nil
}

func (e *Etcd) NewSession(ctx context.Context, w int, ttl time.Duration, keepAlive bool) (bench.Session, error) {
	cl := e.cl(w)
	g, err := cl.Grant(ctx, int64(ttl/time.Second))
	if err != nil {
		return nil, err
	}
	s := &session{e: e, cl: cl, lease: g.ID, expires: time.Now().Add(time.Duration(g.TTL) * time.Second)}
	if keepAlive {
		kctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		ch, err := cl.KeepAlive(kctx, g.ID)
		if err != nil {
			cancel()
			return nil, err
		}
		s.stop = cancel
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			for range ch { // drain: clientv3 drops responses nobody reads
			}
		}()
	}
	return s, nil
}

type session struct {
	e       *Etcd
	cl      *clientv3.Client
	lease   clientv3.LeaseID
	expires time.Time // when the lease expires unless kept alive
	stop    context.CancelFunc
	wg      sync.WaitGroup
}

func (s *session) key(sem string) string {
	return s.e.semKey(sem, fmt.Sprintf("q/%016x", int64(s.lease)))
}

var errNotAcquired = errors.New("not acquired within the timeout")

func (s *session) Acquire(ctx context.Context, sem string, weight int64, timeout time.Duration) (bench.Grant, error) {
	key, queue, permitsKey := s.key(sem), s.e.semKey(sem, "q/"), s.e.semKey(sem, "permits")
	reads := []clientv3.Op{clientv3.OpGet(permitsKey),
		clientv3.OpGet(queue, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))}
	resp, err := s.cl.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(append([]clientv3.Op{clientv3.OpPut(key, strconv.FormatInt(weight, 10), clientv3.WithLease(s.lease))}, reads...)...).
		Else(reads...).
		Commit()
	if err != nil {
		return bench.Grant{}, err
	}
	rs := resp.Responses
	if resp.Succeeded {
		rs = rs[1:]
	}
	pk := rs[0].GetResponseRange().Kvs
	if len(pk) == 0 {
		return bench.Grant{}, fmt.Errorf("semaphore %q does not exist", sem)
	}
	permits, err := strconv.ParseInt(string(pk[0].Value), 10, 64)
	if err != nil {
		return bench.Grant{}, fmt.Errorf("semaphore %q: permits %q: %v", sem, pk[0].Value, err)
	}
	// My position: the txn's revision when it created my key; my key's
	// create revision when it was there already (a retried acquire).
	mine := resp.Header.Revision
	if !resp.Succeeded {
		mine = 0
		for _, kv := range rs[1].GetResponseRange().Kvs {
			if string(kv.Key) == key {
				mine = kv.CreateRevision
			}
		}
		if mine == 0 {
			return bench.Grant{}, fmt.Errorf("own key vanished between compare and read")
		}
	}
	ahead := map[string]int64{}
	var sum int64
	for _, kv := range rs[1].GetResponseRange().Kvs {
		if kv.CreateRevision < mine {
			w, _ := strconv.ParseInt(string(kv.Value), 10, 64)
			ahead[string(kv.Key)] = w
			sum += w
		}
	}
	if sum+weight <= permits {
		return bench.Grant{Based: uint64(resp.Header.Revision), Expires: s.expires}, nil
	}
	if timeout <= 0 {
		s.abandon(ctx, key)
		return bench.Grant{}, errNotAcquired
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// Only deletes matter: a key created later is behind us.
	for wr := range s.cl.Watch(clientv3.WithRequireLeader(wctx), queue, clientv3.WithPrefix(),
		clientv3.WithRev(resp.Header.Revision+1), clientv3.WithFilterPut()) {
		if err := wr.Err(); err != nil {
			s.abandon(ctx, key)
			return bench.Grant{}, err
		}
		for _, ev := range wr.Events {
			w, ok := ahead[string(ev.Kv.Key)]
			if !ok {
				continue
			}
			delete(ahead, string(ev.Kv.Key))
			if sum -= w; sum+weight <= permits {
				// A delete event's ModRevision is the revision of the delete.
				return bench.Grant{Based: uint64(ev.Kv.ModRevision), Expires: s.expires}, nil
			}
		}
	}
	s.abandon(ctx, key)
	if ctx.Err() != nil {
		return bench.Grant{}, ctx.Err()
	}
	return bench.Grant{}, errNotAcquired
}

// abandon leaves the queue after a failed wait (best effort: the key goes
// with the lease anyway).
func (s *session) abandon(ctx context.Context, key string) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_, _ = s.cl.Delete(cctx, key)
}

func (s *session) Release(ctx context.Context, sem string) (uint64, error) {
	r, err := s.cl.Delete(ctx, s.key(sem))
	if err != nil {
		return 0, err
	}
	if r.Deleted != 1 {
		return 0, fmt.Errorf("release: not held")
	}
	return uint64(r.Header.Revision), nil
}

func (s *session) Touch(ctx context.Context) error {
	_, err := s.cl.Put(ctx, s.e.prefix+fmt.Sprintf("touch/%016x", int64(s.lease)), "")
	return err
}

func (s *session) Close(ctx context.Context) error {
	if s.stop != nil {
		s.stop()
		s.wg.Wait()
	}
	_, err := s.cl.Revoke(ctx, s.lease)
	return err
}
