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

// The wait-group and barrier workloads on ZooKeeper.
//
// Wait groups: neither ZooKeeper nor Curator has one, so this is the
// obvious recipe, a node per job and a count of children, under
// w/<group>:
//
//	w/<group>            its data is the number of jobs (1 create at
//	                     creation, 1 transaction)
//	w/<group>/<job id>   one persistent node per completed job; a batch
//	                     is one multi of creates (1 transaction)
//
// A job completed twice: the multi fails on the node that exists (a failed
// write is a transaction too), then the jobs' nodes are listed and a multi
// creates the missing ones. The waiter reads the counter (1 getData), then
// lists the children with a watch (getChildren) until there are enough,
// one getChildren per wake-up (a batch that lands between two listings
// is counted by the next one). Deleting the group is 1 getChildren and
// one multi deleting every job node and the group (1 transaction per 500
// nodes). What it does not do that Grackle does: refuse jobs past the
// counter (all or none), expire, list completion times from one clock.
//
// Barriers: Curator's DistributedDoubleBarrier's enter, on a node per
// round (a double barrier can be entered again only after every process
// has left, which a cyclic barrier does not need), under b/<name>/<round>:
// a process
//
//	1. checks for <round>/ready with a watch (exists, 1 read);
//	2. creates its own ephemeral node (1 transaction);
//	3. lists <round>'s children (1 read); if every process's node is
//	   there, the barrier has tripped; otherwise it waits for the watch on
//	   ready.
//
// The process that creates ready is the last to arrive. Two changes to
// Curator's enter, both cheaper for ZooKeeper and neither on the path of
// a waiter: the processes' nodes are sequential, so that the one whose
// node is the last created (the one that tripped the round) alone
// creates ready (in Curator every process that sees all the nodes
// creates it, and all but one of those creates fail, a transaction
// each); and it creates ready and the next round's node in one multi (1
// transaction), so that no process finds the next round's node missing.
// Processes that see every node but their own is not the last still wait
// for ready, which exists once the next round's node does. Per round of
// n processes: n + 1 transactions, 2n reads, n watches.

// CreateWaitGroup creates the group's node, its job count as data.
func (z *ZK) CreateWaitGroup(ctx context.Context, w int, name string, counter int64) error {
	c, err := z.worker(ctx, w)
	if err != nil {
		return err
	}
	_, err = c.Create(z.root+"/w/"+name, []byte(strconv.FormatInt(counter, 10)), zk.FlagPersistent, acl)
	return err
}

// CompleteJobs creates a node per job in one multi.
func (z *ZK) CompleteJobs(ctx context.Context, w int, name string, jobs []string) error {
	c, err := z.worker(ctx, w)
	if err != nil {
		return err
	}
	g := z.root + "/w/" + name
	create := func(jobs []string) error {
		if len(jobs) == 0 {
			return nil
		}
		ops := make([]any, len(jobs))
		for i, j := range jobs {
			ops[i] = &zk.CreateRequest{Path: g + "/" + j, Acl: acl, Flags: zk.FlagPersistent}
		}
		return multi(c.Conn, ops...)
	}
	err = create(jobs)
	if !errors.Is(err, zk.ErrNodeExists) {
		return err
	}
	kids, _, err := c.Children(g)
	if err != nil {
		return err
	}
	done := make(map[string]bool, len(kids))
	for _, k := range kids {
		done[k] = true
	}
	var rest []string
	for _, j := range jobs {
		if !done[j] {
			rest = append(rest, j)
		}
	}
	return create(rest)
}

// WaitWaitGroup reads the count, then lists the jobs with a watch until
// there are enough.
func (z *ZK) WaitWaitGroup(ctx context.Context, w int, name string) error {
	c, err := z.worker(ctx, w)
	if err != nil {
		return err
	}
	g := z.root + "/w/" + name
	b, _, err := c.Get(g)
	if err != nil {
		return fmt.Errorf("wait group %s: %w", name, err)
	}
	counter, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return fmt.Errorf("wait group %s: counter %q: %v", name, b, err)
	}
	for {
		kids, _, ch, err := c.ChildrenW(g)
		if err != nil {
			return fmt.Errorf("wait group %s: %w", name, err)
		}
		if int64(len(kids)) >= counter {
			return nil
		}
		select {
		case ev := <-ch:
			if ev.Err != nil {
				return fmt.Errorf("wait group %s: watch: %w", name, ev.Err)
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// DeleteWaitGroup deletes the job nodes and the group.
func (z *ZK) DeleteWaitGroup(ctx context.Context, w int, name string) error {
	c, err := z.worker(ctx, w)
	if err != nil {
		return err
	}
	return deleteTree(c.Conn, z.root+"/w/"+name)
}

// NewBarrier opens one session per process (on the leader, timeout 60 s)
// and creates the barrier's node and its first round's.
func (z *ZK) NewBarrier(ctx context.Context, name string, parties int) (bench.Barrier, error) {
	b := &zkBarrier{dir: z.root + "/b/" + name, parties: parties, conns: make([]*conn, parties)}
	if err := ensurePath(z.admin, b.roundDir(1)); err != nil {
		return nil, err
	}
	var wg sync.WaitGroup
	errs := make([]error, parties)
	for w := 0; w < parties; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			b.conns[w], errs[w] = dial(ctx, z.leader, workerTTL, true)
		}(w)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		_ = b.Close(ctx)
		return nil, err
	}
	return b, nil
}

type zkBarrier struct {
	dir     string
	parties int
	conns   []*conn
}

func (b *zkBarrier) roundDir(round int64) string { return fmt.Sprintf("%s/%010d", b.dir, round) }

// Meet is the enter of the recipe above. It knows which process was last.
func (b *zkBarrier) Meet(ctx context.Context, w int, round int64) (time.Time, bool, bool, error) {
	c := b.conns[w]
	d := b.roundDir(round)
	ready := d + "/ready"
	ok, _, ch, err := c.ExistsW(ready)
	if err != nil {
		return time.Time{}, false, false, fmt.Errorf("exists %s: %w", ready, err)
	}
	if ok {
		return time.Time{}, false, false, fmt.Errorf("round %d: tripped before process %d arrived", round, w)
	}
	node, err := c.Create(d+"/p-", nil, zk.FlagEphemeralSequential, acl)
	if err != nil {
		return time.Time{}, false, false, fmt.Errorf("round %d: create: %w", round, err)
	}
	arrived := time.Now()
	kids, _, err := c.Children(d)
	if err != nil {
		return arrived, false, true, fmt.Errorf("round %d: getChildren: %w", round, err)
	}
	var procs []string
	for _, k := range kids {
		if k != "ready" {
			procs = append(procs, k)
		}
	}
	if len(procs) >= b.parties {
		sortBySeq(procs)
		if procs[len(procs)-1] == path.Base(node) {
			err := multi(c.Conn,
				&zk.CreateRequest{Path: ready, Acl: acl, Flags: zk.FlagPersistent},
				&zk.CreateRequest{Path: b.roundDir(round + 1), Acl: acl, Flags: zk.FlagPersistent})
			if err != nil {
				return arrived, true, true, fmt.Errorf("round %d: create ready: %w", round, err)
			}
			return arrived, true, true, nil
		}
	}
	select {
	case ev := <-ch:
		if ev.Err != nil {
			return arrived, false, true, fmt.Errorf("round %d: watch: %w", round, ev.Err)
		}
		return arrived, false, true, nil
	case <-ctx.Done():
		return arrived, false, true, ctx.Err()
	}
}

// LastArrival is not needed: Meet knows.
func (b *zkBarrier) LastArrival(ctx context.Context, round int64) (int, error) {
	return 0, fmt.Errorf("zookeeper barrier: Meet reports the last arrival")
}

// Close ends the processes' sessions (their nodes go with them); Cleanup
// deletes the rounds' nodes.
func (b *zkBarrier) Close(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, c := range b.conns {
		if c != nil {
			wg.Add(1)
			go func(c *conn) { defer wg.Done(); c.Close() }(c)
		}
	}
	wg.Wait()
	return nil
}
