package main

import (
	"context"
	"errors"
	"fmt"
	"path"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/grackle-coord/grackle/bench"
)

// The lock recipe of ZooKeeper's documentation ("Locks", in its recipes),
// which Apache Curator's InterProcessMutex implements: a lock is a
// directory; a contender creates an ephemeral sequential node in it and
// holds the lock when its node has the lowest sequence number. A
// contender that does not hold it watches only the node just before its
// own (no herd: a release wakes one waiter), and when that node goes,
// lists the directory again (the node before it may have gone because its
// session ended while it was still waiting, not because it held the
// lock). First come, first served: grants follow the sequence numbers.
//
// Operations (Curator's, without its protected-name prefix, a GUID in the
// node's name that finds the node again after a connection loss during
// the create; it adds no operation when nothing is lost):
//
//	acquire, free:      1 create (1 transaction) + 1 getChildren
//	acquire, contended: 1 create + 1 getChildren, then per wake-up
//	                    1 getData with a watch on the predecessor and,
//	                    once it fires, 1 getChildren again
//	acquire, not waiting and taken (timeout 0): 1 create + 1 getChildren
//	                    + 1 delete of its node (2 transactions)
//	release:            1 delete (1 transaction)
//
// The first acquire of a lock whose directory does not exist yet also
// creates the directory (Curator: creatingParentContainersIfNeeded).

var errNotAcquired = errors.New("not acquired within the timeout")

// acquireLock takes the lock of dir for c's session and returns its node
// and sequence number. wait false: fail at once when it is taken;
// otherwise wait until deadline.
func acquireLock(ctx context.Context, c *zk.Conn, dir string, wait bool, deadline time.Time) (string, uint64, error) {
	node, err := c.Create(dir+"/lock-", nil, zk.FlagEphemeralSequential, acl)
	if errors.Is(err, zk.ErrNoNode) {
		if err = ensurePath(c, dir); err == nil {
			node, err = c.Create(dir+"/lock-", nil, zk.FlagEphemeralSequential, acl)
		}
	}
	if err != nil {
		return "", 0, fmt.Errorf("lock %s: create: %w", dir, err)
	}
	mine := path.Base(node)
	seq, ok := seqOf(mine)
	if !ok {
		return "", 0, fmt.Errorf("lock %s: node %q has no sequence number", dir, node)
	}
	giveUp := func(err error) (string, uint64, error) {
		_ = c.Delete(node, -1)
		return "", 0, err
	}
	for {
		kids, _, err := c.Children(dir)
		if err != nil {
			return giveUp(fmt.Errorf("lock %s: getChildren: %w", dir, err))
		}
		sortBySeq(kids)
		at := -1
		for i, k := range kids {
			if k == mine {
				at = i
			}
		}
		switch {
		case at < 0:
			return "", 0, fmt.Errorf("lock %s: own node %s gone (session expired?)", dir, mine)
		case at == 0:
			return node, seq, nil
		case !wait || !time.Now().Before(deadline):
			return giveUp(errNotAcquired)
		}
		// getData, not exists, with the watch: exists on a node that has
		// just gone would leave a watch for its creation behind.
		_, _, ch, err := c.GetW(dir + "/" + kids[at-1])
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return giveUp(fmt.Errorf("lock %s: getData: %w", dir, err))
		}
		t := time.NewTimer(time.Until(deadline))
		select {
		case ev := <-ch:
			t.Stop()
			if ev.Err != nil {
				return giveUp(fmt.Errorf("lock %s: watch: %w", dir, ev.Err))
			}
		case <-t.C:
			// one more look: the predecessor may have gone just now
		case <-ctx.Done():
			t.Stop()
			return giveUp(ctx.Err())
		}
	}
}

// NewLockSession opens a session of its own for worker w (on the leader:
// every workload but reads sends everything to the leader, as on etcd).
func (z *ZK) NewLockSession(ctx context.Context, w int, ttl time.Duration) (bench.LockSession, error) {
	c, err := dial(ctx, z.leader, ttl, true)
	if err != nil {
		return nil, err
	}
	return &lockSession{z: z, c: c, held: map[string]string{}}, nil
}

type lockSession struct {
	z    *ZK
	c    *conn
	mu   sync.Mutex
	held map[string]string // lock name -> own node
}

// Lock is the recipe's acquire; timeout 0 is Curator's acquire(0, ...):
// one look, no wait.
func (l *lockSession) Lock(ctx context.Context, name string, timeout time.Duration) (bench.Grant, error) {
	node, seq, err := acquireLock(ctx, l.c.Conn, l.z.lockDir(name), timeout > 0, time.Now().Add(timeout))
	if err != nil {
		return bench.Grant{}, err
	}
	l.mu.Lock()
	l.held[name] = node
	l.mu.Unlock()
	// Sequence numbers of one lock's nodes increase with every contender
	// and the grants follow them, so they order the grants.
	return bench.Grant{Based: seq, Expires: l.c.expires()}, nil
}

// Unlock deletes the session's node of the lock.
func (l *lockSession) Unlock(ctx context.Context, name string) error {
	l.mu.Lock()
	node, ok := l.held[name]
	delete(l.held, name)
	l.mu.Unlock()
	if !ok {
		return fmt.Errorf("unlock %s: not held by this session", name)
	}
	return l.c.Delete(node, -1)
}

func (l *lockSession) Touch(ctx context.Context) error { return l.z.touch(l.c) }

// Close ends the session (a closeSession transaction, which deletes its
// ephemeral nodes).
func (l *lockSession) Close(ctx context.Context) error {
	l.c.Close()
	return nil
}
