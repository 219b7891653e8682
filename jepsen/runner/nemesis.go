package runner

import (
	"context"
	"fmt"
	"math/rand"
	"time"

	"github.com/grackle-coord/grackle/jepsen/cluster"
	"github.com/grackle-coord/grackle/jepsen/history"
)

// nemesis injects one fault at a time on a seeded schedule and records
// each window from injection to heal.
type nemesis struct {
	c        *cluster.Cluster
	rec      *recorder
	rng      *rand.Rand
	kinds    []string
	every    time.Duration
	hold     time.Duration
	logf     func(string, ...any)
	windows  []history.Nemesis
	replaced int
}

func (n *nemesis) sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// jitter returns a duration in [d/2, 3d/2).
func (n *nemesis) jitter(d time.Duration) time.Duration {
	return d/2 + time.Duration(n.rng.Int63n(int64(d)))
}

func (n *nemesis) run(ctx context.Context) {
	if len(n.kinds) == 0 {
		<-ctx.Done()
		return
	}
	for {
		if !n.sleep(ctx, n.jitter(n.every)) {
			return
		}
		kind := n.kinds[n.rng.Intn(len(n.kinds))]
		w := history.Nemesis{Kind: kind, Start: n.rec.since()}
		heal, detail, err := n.inject(ctx, kind)
		w.Detail = detail
		if err != nil {
			n.logf("nemesis %s: %v", kind, err)
		}
		n.logf("nemesis %s %s at %v", kind, detail, w.Start.Round(time.Millisecond))
		// Hold the fault even past the run's end: the heal must happen.
		time.Sleep(n.jitter(n.hold))
		if heal != nil {
			if err := heal(); err != nil {
				n.logf("nemesis %s heal: %v", kind, err)
			}
		}
		w.End = n.rec.since()
		n.windows = append(n.windows, w)
		if ctx.Err() != nil {
			return
		}
	}
}

func (n *nemesis) perm() []int { return n.rng.Perm(len(n.c.Nodes)) }

func names(c *cluster.Cluster, idx []int) string {
	s := ""
	for i, x := range idx {
		if i > 0 {
			s += ","
		}
		s += c.Nodes[x].ID
	}
	return s
}

// inject applies one fault and returns how to heal it.
func (n *nemesis) inject(ctx context.Context, kind string) (func() error, string, error) {
	c := n.c
	size := len(c.Nodes)
	switch kind {
	case "kill":
		i := n.rng.Intn(size)
		if n.rng.Intn(2) == 0 {
			if li := c.Leader(ctx); li >= 0 {
				i = li
			}
		}
		c.Kill(i)
		return func() error { return c.Restart(i) }, c.Nodes[i].ID, nil
	case "pause":
		i := n.rng.Intn(size)
		if n.rng.Intn(2) == 0 {
			if li := c.Leader(ctx); li >= 0 {
				i = li
			}
		}
		c.Pause(i)
		return func() error { c.Resume(i); return nil }, c.Nodes[i].ID, nil
	case "partition-halves":
		p := n.perm()
		a, b := p[:size/2], p[size/2:]
		err := c.Partition([][]int{a, b})
		return c.Heal, names(c, a) + " | " + names(c, b), err
	case "partition-majority":
		p := n.perm()
		minority := p[:(size-1)/2]
		if len(minority) == 0 {
			minority = p[:1]
		}
		rest := p[len(minority):]
		err := c.Partition([][]int{minority, rest})
		return c.Heal, "minority " + names(c, minority), err
	case "isolate-leader":
		li := c.Leader(ctx)
		if li < 0 {
			li = n.rng.Intn(size)
		}
		var rest []int
		for i := 0; i < size; i++ {
			if i != li {
				rest = append(rest, i)
			}
		}
		err := c.Partition([][]int{{li}, rest})
		return c.Heal, c.Nodes[li].ID, err
	case "bridge":
		// Two halves that share one node: it sees everyone, they do not
		// see each other.
		p := n.perm()
		mid := size / 2
		a := append([]int{}, p[:mid+1]...)
		b := append([]int{p[mid]}, p[mid+1:]...)
		err := c.Partition([][]int{a, b})
		return c.Heal, "bridge " + c.Nodes[p[mid]].ID + ": " + names(c, a) + " | " + names(c, b), err
	case "membership":
		for i := range c.Nodes {
			if !c.Running(i) {
				return nil, "skipped (a node is down)", nil
			}
		}
		i := n.rng.Intn(size)
		err := c.Replace(ctx, i)
		n.replaced++
		return nil, "replace " + c.Nodes[i].ID, err
	case "transfer-storm":
		k := 0
		for j := 0; j < 5 && ctx.Err() == nil; j++ {
			if c.TransferLeadership(ctx) == nil {
				k++
			}
			time.Sleep(300 * time.Millisecond)
		}
		return nil, fmt.Sprintf("%d transfers", k), nil
	}
	return nil, "", fmt.Errorf("unknown nemesis %q", kind)
}
