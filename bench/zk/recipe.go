package main

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strconv"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/grackle-coord/grackle/bench"
)

// ZK drives the workloads on a ZooKeeper ensemble. Everything a run
// creates lives under /grackle-bench/<run>/:
//
//	s/<name>            a semaphore; its data is its permits
//	s/<name>/locks/     the semaphore's lock (the lock recipe, lock.go)
//	s/<name>/leases/    one ephemeral sequential node per permit held
//	l/<name>/           an exclusive lock (lock.go)
//	t/<session id>      an ephemeral node per session, rewritten by Touch
//	w/, b/              wait groups and barriers (waits.go)
//
// A bench session (NewSession, NewLockSession) is one ZooKeeper session:
// the lease. Its keep-alive is the client's own ping, a third of the
// timeout apart; creating it is a createSession transaction and Close a
// closeSession transaction, which deletes its ephemeral nodes.
type ZK struct {
	servers []string
	leader  string
	spread  bool     // worker connections over every server, not the leader only
	admin   *zk.Conn // setup, cleanup, semaphore creation (on the leader)
	root    string

	mu      sync.Mutex
	workers map[int]*conn // per-worker sessions for reads and wait groups
	permits map[string]int64
}

const workerTTL = 60 * time.Second

func (z *ZK) semDir(name string) string  { return z.root + "/s/" + name }
func (z *ZK) lockDir(name string) string { return z.root + "/l/" + name }

// Setup creates the run's directories.
func (z *ZK) Setup(ctx context.Context, runID string) error {
	z.root = "/grackle-bench/" + runID
	for _, d := range []string{"s", "l", "t", "w", "b"} {
		if err := ensurePath(z.admin, z.root+"/"+d); err != nil {
			return err
		}
	}
	return nil
}

// Cleanup closes the worker sessions and deletes the run's nodes.
func (z *ZK) Cleanup(ctx context.Context) error {
	z.mu.Lock()
	ws := z.workers
	z.workers = nil
	z.permits = nil
	z.mu.Unlock()
	for _, c := range ws {
		c.Close()
	}
	return deleteTree(z.admin, z.root)
}

// worker is worker w's own session (reads, wait groups), opened on first
// use: ZooKeeper answers one session's requests in order, so workers
// sharing one would wait for each other's syncs. On the leader, or with
// spread on server w mod n.
func (z *ZK) worker(ctx context.Context, w int) (*conn, error) {
	z.mu.Lock()
	c, ok := z.workers[w]
	z.mu.Unlock()
	if ok {
		return c, nil
	}
	server := z.leader
	if z.spread {
		server = z.servers[w%len(z.servers)]
	}
	c, err := dial(ctx, server, workerTTL, true)
	if err != nil {
		return nil, err
	}
	z.mu.Lock()
	defer z.mu.Unlock()
	if old, ok := z.workers[w]; ok {
		c.Close()
		return old, nil
	}
	if z.workers == nil {
		z.workers = map[int]*conn{}
	}
	z.workers[w] = c
	return c, nil
}

// CreateSemaphore creates the semaphore's node (its permits as data) and
// its locks and leases directories, 3 transactions.
func (z *ZK) CreateSemaphore(ctx context.Context, name string, permits int64) error {
	d := z.semDir(name)
	if _, err := z.admin.Create(d, []byte(strconv.FormatInt(permits, 10)), zk.FlagPersistent, acl); err != nil {
		return fmt.Errorf("create semaphore %s: %w", name, err)
	}
	for _, k := range []string{"/locks", "/leases"} {
		if _, err := z.admin.Create(d+k, nil, zk.FlagPersistent, acl); err != nil {
			return fmt.Errorf("create semaphore %s: %w", name, err)
		}
	}
	return nil
}

// maxLeases is a semaphore's permits, read once: Curator's semaphore takes
// them as a constructor argument that every process knows.
func (z *ZK) maxLeases(c *zk.Conn, name string) (int64, error) {
	z.mu.Lock()
	n, ok := z.permits[name]
	z.mu.Unlock()
	if ok {
		return n, nil
	}
	b, _, err := c.Get(z.semDir(name))
	if err != nil {
		return 0, fmt.Errorf("semaphore %s: %w", name, err)
	}
	n, err = strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("semaphore %s: permits %q: %v", name, b, err)
	}
	z.mu.Lock()
	if z.permits == nil {
		z.permits = map[string]int64{}
	}
	z.permits[name] = n
	z.mu.Unlock()
	return n, nil
}

// Read is a linearizable read of a semaphore: sync (the server the session
// is connected to catches up with the leader) then getData of the
// semaphore's node, on the worker's session. ZooKeeper's reads are
// otherwise served from the connected server's state, which may lag.
func (z *ZK) Read(ctx context.Context, w int, sem string) error {
	c, err := z.worker(ctx, w)
	if err != nil {
		return err
	}
	if _, err := c.Sync(z.semDir(sem)); err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	_, _, err = c.Get(z.semDir(sem))
	return err
}

// CommitIndex is the leader's last zxid (srvr): its low 32 bits count the
// transactions of the leader's epoch, every committed write (create,
// delete, setData, a multi as one, createSession, closeSession, and a
// write that failed, such as a create of a node that exists).
func (z *ZK) CommitIndex(ctx context.Context) (uint64, error) {
	_, zxid, err := srvr(ctx, z.leader)
	return zxid, err
}

// NewSession opens a session of its own for worker w, on the leader.
// keepAlive false: the client never pings, so the session expires its
// timeout after its last request.
func (z *ZK) NewSession(ctx context.Context, w int, ttl time.Duration, keepAlive bool) (bench.Session, error) {
	c, err := dial(ctx, z.leader, ttl, keepAlive)
	if err != nil {
		return nil, err
	}
	return &session{z: z, c: c, leases: map[string][]string{}}, nil
}

// The semaphore, as Curator's InterProcessSemaphoreV2 builds it: a lease
// is an ephemeral sequential node under leases/, and a lock (the lock
// recipe on locks/) is held around a lease's creation:
//
//	take the lock; create my lease node; loop: getChildren of leases/
//	with a watch; if there are at most permits, I hold; else wait for the
//	watch; finally release the lock.
//
// While one contender waits for a permit it holds the lock, so the others
// queue on the lock, first come first served. A weight of k is k leases
// taken one after the other, each with its own round of the lock (as
// Curator's acquire(k) does). A holder whose session ends loses its
// leases with it, and the watching contender sees the children change.
//
// Operations per lease, uncontended (the pairs workload):
//
//	acquire: lock 1 create + 1 getChildren; lease 1 create;
//	         1 getChildren with a watch; unlock 1 delete
//	         = 3 transactions, 2 reads, 1 watch set
//	release: 1 delete of the lease = 1 transaction (it fires the watch
//	         the acquire left, one notification to the session itself)
//
// Contended, a waiter adds the lock's wait (lock.go) and, while it holds
// the lock, one getChildren with a watch per change of leases/. An
// acquire that does not wait (timeout 0) and finds no permit deletes its
// lease again (1 more transaction).
type session struct {
	z      *ZK
	c      *conn
	mu     sync.Mutex
	leases map[string][]string // semaphore -> own lease nodes
}

func (s *session) Acquire(ctx context.Context, sem string, weight int64, timeout time.Duration) (bench.Grant, error) {
	permits, err := s.z.maxLeases(s.c.Conn, sem)
	if err != nil {
		return bench.Grant{}, err
	}
	if weight < 1 || weight > permits {
		return bench.Grant{}, fmt.Errorf("weight: must be 1 to the %d permits of %s, got %d", permits, sem, weight)
	}
	deadline := time.Now().Add(timeout)
	var got []string
	var seq uint64
	for i := int64(0); i < weight; i++ {
		lease, n, err := s.acquireLease(ctx, sem, permits, timeout > 0, deadline)
		if err != nil {
			for _, l := range got {
				_ = s.c.Delete(l, -1)
			}
			return bench.Grant{}, err
		}
		got, seq = append(got, lease), n
	}
	s.mu.Lock()
	s.leases[sem] = append(s.leases[sem], got...)
	s.mu.Unlock()
	// Lease nodes are created one at a time under the lock, and granted in
	// that order, so their sequence numbers order the grants.
	return bench.Grant{Based: seq, Expires: s.c.expires()}, nil
}

// acquireLease takes one lease: the lock, the lease node, the wait for a
// permit, the unlock.
func (s *session) acquireLease(ctx context.Context, sem string, permits int64, wait bool, deadline time.Time) (string, uint64, error) {
	d := s.z.semDir(sem)
	lockNode, _, err := acquireLock(ctx, s.c.Conn, d+"/locks", wait, deadline)
	if err != nil {
		return "", 0, err
	}
	defer s.c.Delete(lockNode, -1)
	lease, err := s.c.Create(d+"/leases/lease-", nil, zk.FlagEphemeralSequential, acl)
	if err != nil {
		return "", 0, fmt.Errorf("semaphore %s: create lease: %w", sem, err)
	}
	mine := path.Base(lease)
	seq, _ := seqOf(mine)
	giveUp := func(err error) (string, uint64, error) {
		_ = s.c.Delete(lease, -1)
		return "", 0, err
	}
	for {
		kids, _, ch, err := s.c.ChildrenW(d + "/leases")
		if err != nil {
			return giveUp(fmt.Errorf("semaphore %s: getChildren: %w", sem, err))
		}
		found := false
		for _, k := range kids {
			found = found || k == mine
		}
		switch {
		case !found:
			return "", 0, fmt.Errorf("semaphore %s: own lease %s gone (session expired?)", sem, mine)
		case int64(len(kids)) <= permits:
			return lease, seq, nil
		case !wait || !time.Now().Before(deadline):
			return giveUp(errNotAcquired)
		}
		t := time.NewTimer(time.Until(deadline))
		select {
		case ev := <-ch:
			t.Stop()
			if ev.Err != nil {
				return giveUp(fmt.Errorf("semaphore %s: watch: %w", sem, ev.Err))
			}
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return giveUp(ctx.Err())
		}
	}
}

// Release deletes the session's leases of the semaphore, one transaction
// each. ZooKeeper's delete reply carries the transaction's zxid only in a
// header go-zookeeper does not return, and no workload uses a release's
// position: it returns 0.
func (s *session) Release(ctx context.Context, sem string) (uint64, error) {
	s.mu.Lock()
	ls := s.leases[sem]
	delete(s.leases, sem)
	s.mu.Unlock()
	if len(ls) == 0 {
		return 0, fmt.Errorf("release %s: not held by this session", sem)
	}
	for _, l := range ls {
		if err := s.c.Delete(l, -1); err != nil {
			return 0, fmt.Errorf("release %s: delete %s: %w", sem, l, err)
		}
	}
	return 0, nil
}

func (s *session) Touch(ctx context.Context) error { return s.z.touch(s.c) }

// Close ends the session (a closeSession transaction, which deletes its
// ephemeral nodes). go-zookeeper waits up to a second for the reply and
// reports no error.
func (s *session) Close(ctx context.Context) error {
	s.c.Close()
	return nil
}

// touch is one replicated write: setData of the session's own node (an
// ephemeral node, created by the session's first touch, which is then the
// write; a setData of a node that does not exist would be a transaction
// too, a failed one).
func (z *ZK) touch(c *conn) error {
	p := z.root + "/t/" + strconv.FormatInt(c.SessionID(), 16)
	if c.touched.Load() {
		_, err := c.Set(p, nil, -1)
		return err
	}
	_, err := c.Create(p, nil, zk.FlagEphemeral, acl)
	if err == nil || errors.Is(err, zk.ErrNodeExists) {
		c.touched.Store(true)
		return nil
	}
	return err
}
