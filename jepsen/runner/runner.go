// Package runner drives a fault-injection run: it starts a cluster in
// network namespaces, runs the workloads while nemeses break it on a
// seeded schedule, heals, and returns the history of everything the
// clients saw.
package runner

import (
	"context"
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/grackle-coord/grackle/jepsen/cluster"
	"github.com/grackle-coord/grackle/jepsen/history"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// AllNemeses are the fault kinds, in the order of the schedule's choices.
var AllNemeses = []string{"kill", "pause", "partition-halves", "partition-majority", "isolate-leader", "bridge", "membership", "transfer-storm"}

// Config of one run.
type Config struct {
	Nodes     int
	Duration  time.Duration
	Seed      int64
	Nemeses   []string
	Binary    string
	Dir       string
	Net       int
	ServerEnv []string
	// Secure, when set, runs the cluster with client mutual TLS, peer TLS
	// and access control; the workloads then use a token that may only
	// write to their namespace, the harness the bootstrapped admin token.
	Secure *cluster.Secure
	// Unary: the workloads send unary calls, not over multiplexed streams.
	Unary bool
	// Linear is the number of processes of the linearizability workload
	// (long leases, never expire); Fenced of the fenced/expiry workload;
	// Locks of the lock workload (locks.go; with Locks > 0 one more
	// process reads the locks' queues).
	Linear, Fenced, Locks int
	// WaitGroups is the number of completer processes of the wait-group
	// workload (waits.go; with WaitGroups > 0 a creator, a waiter and a
	// reader join them); Barriers the number of barriers of the barrier
	// workload (three processes and an observer each).
	WaitGroups, Barriers int
	// FaultEvery and FaultFor bound the gap between faults and their length.
	FaultEvery, FaultFor time.Duration
	Logf                 func(format string, a ...any)
}

const ns = "jepsen"

// Run executes one run and returns its history.
func Run(ctx context.Context, cfg Config) (*history.History, error) {
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	rng := rand.New(rand.NewSource(cfg.Seed))
	c, err := cluster.Start(cluster.Config{Nodes: cfg.Nodes, Binary: cfg.Binary, Dir: cfg.Dir, Net: cfg.Net, Env: cfg.ServerEnv, Secure: cfg.Secure, Unary: cfg.Unary,
		ExtraArgs: []string{"--snapshot-threshold", "500", "--snapshot-interval", "2s", "--trailing-logs", "200"}})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if err := c.WaitServing(ctx, 30*time.Second); err != nil {
		return nil, err
	}
	h := &history.History{Seed: cfg.Seed, Nodes: cfg.Nodes, Duration: cfg.Duration, Permits: map[string]int64{},
		Meta: map[string]string{"nemeses": strings.Join(cfg.Nemeses, ","), "linear_prefix": "lin-", "fenced_prefix": "fen-"}}
	if cfg.Locks > 0 {
		h.LockNames = lockNames
	}
	w := &world{c: c, rec: &recorder{t0: time.Now()}, reg: map[string]uint64{}}
	if err := w.setup(ctx, h, rng); err != nil {
		return nil, err
	}
	if cfg.Barriers > 0 {
		if err := w.setupBarriers(ctx, rng, cfg.Barriers); err != nil {
			return nil, err
		}
	}
	if c.Secured() {
		tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		w.token, err = c.CreateToken(tctx, "write", ns)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("setup: %w", err)
		}
		h.Meta["secure"] = "client mutual TLS, peer TLS, acl (workloads: write token on " + ns + ")"
	}
	cfg.Logf("cluster of %d up%s; semaphores %v", cfg.Nodes, map[bool]string{true: " (mutual TLS, peer TLS, acl)"}[c.Secured()], h.Permits)

	runCtx, stop := context.WithTimeout(ctx, cfg.Duration)
	defer stop()
	var wg sync.WaitGroup
	for p := 0; p < cfg.Linear; p++ {
		wg.Add(1)
		go func(p int) { defer wg.Done(); w.linear(runCtx, p, cfg.Seed+int64(p)*7919) }(p)
	}
	for p := 0; p < cfg.Fenced; p++ {
		wg.Add(1)
		go func(p int) { defer wg.Done(); w.fenced(runCtx, 500+p, cfg.Seed+int64(500+p)*7919) }(p)
	}
	for p := 0; p < cfg.Locks; p++ {
		wg.Add(1)
		go func(p int) { defer wg.Done(); w.locker(runCtx, 600+p, cfg.Seed+int64(600+p)*7919) }(p)
	}
	if cfg.Locks > 0 {
		wg.Add(1)
		go func() { defer wg.Done(); w.lockObserver(runCtx, 850, cfg.Seed+850*7919) }()
	}
	w.startWaits(runCtx, &wg, cfg.Seed, cfg.WaitGroups)
	wg.Add(1)
	go func() { defer wg.Done(); w.local(runCtx, 800, cfg.Seed+800*7919) }()
	nem := &nemesis{c: c, rec: w.rec, rng: rng, kinds: cfg.Nemeses, every: cfg.FaultEvery, hold: cfg.FaultFor, logf: cfg.Logf}
	nem.run(runCtx)
	wg.Wait()

	// Heal everything, then check the cluster serves and read the final state.
	if err := c.HealAll(); err != nil {
		cfg.Logf("heal: %v", err)
	}
	h.HealedAt = w.rec.since()
	cfg.Logf("healed at %v; final reads", h.HealedAt)
	w.final(ctx, h, 30*time.Second, cfg.Locks > 0)
	h.WaitGroups, h.Barriers = len(w.waits.groups), len(w.waits.barriers)
	// The access checker reports these as anomalies.
	handshake, refused := c.SecurityFindings()
	if len(handshake) > 0 {
		h.Meta[history.MetaTLSFailures] = strings.Join(handshake, "\n")
	}
	if len(refused) > 0 {
		h.Meta[history.MetaHarnessRefusals] = strings.Join(refused, "\n")
	}
	h.Ops = w.rec.ops
	h.Nemeses = nem.windows
	sort.SliceStable(h.Ops, func(i, j int) bool { return h.Ops[i].Invoke < h.Ops[j].Invoke })
	return h, nil
}

// world is the shared state of the workload processes.
type world struct {
	c     *cluster.Cluster
	rec   *recorder
	token string // the workloads' token on a secure cluster ("" during setup: the admin's)

	// pick, when set, replaces the cluster in api (tests: an in-process
	// cluster).
	pick func(rng *rand.Rand) (pb.GrackleServiceClient, string)

	linSems, fenSems []string
	regMu            sync.Mutex
	reg              map[string]uint64 // fenced register: highest token seen per semaphore

	waits waitWorld // the wait-group and barrier workloads (waits.go)
}

func (w *world) api(rng *rand.Rand) (pb.GrackleServiceClient, string) {
	if w.pick != nil {
		return w.pick(rng)
	}
	n := w.c.Nodes[rng.Intn(len(w.c.Nodes))]
	return pb.NewGrackleServiceClient(w.c.API(n.GRPC, w.token)), n.ID
}

func (w *world) setup(ctx context.Context, h *history.History, rng *rand.Rand) error {
	do := func(fn func(context.Context, pb.GrackleServiceClient) error) error {
		var err error
		for i := 0; i < 50; i++ {
			cl, _ := w.api(rng)
			cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			err = fn(cctx, cl)
			cancel()
			if err == nil {
				return nil
			}
			time.Sleep(100 * time.Millisecond)
		}
		return err
	}
	if err := do(func(ctx context.Context, cl pb.GrackleServiceClient) error {
		_, err := cl.CreateNamespace(ctx, &pb.CreateNamespaceRequest{Name: ns})
		return err
	}); err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	for i := 0; i < 3; i++ {
		w.linSems = append(w.linSems, fmt.Sprintf("lin-%d", i))
		h.Permits[w.linSems[i]] = 2 + int64(rng.Intn(3))
	}
	for i := 0; i < 2; i++ {
		w.fenSems = append(w.fenSems, fmt.Sprintf("fen-%d", i))
		h.Permits[w.fenSems[i]] = 1
	}
	names := make([]string, 0, len(h.Permits))
	for s := range h.Permits {
		names = append(names, s)
	}
	sort.Strings(names)
	for _, s := range names {
		permits := h.Permits[s]
		if err := do(func(ctx context.Context, cl pb.GrackleServiceClient) error {
			_, err := cl.CreateSemaphore(ctx, &pb.CreateSemaphoreRequest{NamespaceName: ns, SemaphoreName: s, Permits: permits})
			return err
		}); err != nil {
			return fmt.Errorf("setup %s: %w", s, err)
		}
	}
	return nil
}

// call runs one recorded op against a random node.
func (w *world) call(ctx context.Context, rng *rand.Rand, op history.Op, timeout time.Duration, fn func(context.Context, pb.GrackleServiceClient, *history.Op) error) *history.Op {
	cl, node := w.api(rng)
	op.Node = node
	o := w.rec.begin(op)
	cctx, cancel := context.WithTimeout(ctx, timeout)
	err := fn(cctx, cl, o)
	cancel()
	w.rec.end(o, err)
	return o
}

// createLease records a create_lease op; "" when it did not certainly work.
func (w *world) createLease(ctx context.Context, rng *rand.Rand, proc int, ttl int64) string {
	o := w.call(ctx, rng, history.Op{Process: proc, Kind: history.CreateLease, Namespace: ns, TTL: ttl}, 3*time.Second,
		func(ctx context.Context, cl pb.GrackleServiceClient, o *history.Op) error {
			r, err := cl.CreateSemaphoreLease(ctx, &pb.CreateSemaphoreLeaseRequest{NamespaceName: ns, ProcessId: fmt.Sprintf("p%d", o.Process), TtlSeconds: ttl})
			if err == nil {
				o.Lease, o.ExpiresAt = r.Lease.LeaseId, r.Lease.ExpiresAt
			}
			return err
		})
	if o.Outcome != history.OK {
		return ""
	}
	return o.Lease
}

func (w *world) acquire(ctx context.Context, rng *rand.Rand, proc int, sem, lease string, weight, timeout int64) *history.Op {
	return w.call(ctx, rng, history.Op{Process: proc, Kind: history.Acquire, Namespace: ns, Semaphore: sem, Lease: lease, Weight: weight, Timeout: timeout},
		time.Duration(timeout)*time.Second+2*time.Second,
		func(ctx context.Context, cl pb.GrackleServiceClient, o *history.Op) error {
			r, err := cl.AcquireSemaphore(ctx, &pb.AcquireSemaphoreRequest{NamespaceName: ns, SemaphoreName: sem, LeaseId: lease, Weight: weight, TimeoutSeconds: timeout})
			if err == nil {
				o.AcquireOutcome = strings.TrimPrefix(r.Outcome.String(), "ACQUIRE_OUTCOME_")
				if r.Holder != nil {
					o.Token, o.ExpiresAt = r.Holder.FencingToken, r.Holder.ExpiresAt
				}
			}
			return err
		})
}

func (w *world) release(ctx context.Context, rng *rand.Rand, proc int, sem, lease string) *history.Op {
	return w.call(ctx, rng, history.Op{Process: proc, Kind: history.Release, Namespace: ns, Semaphore: sem, Lease: lease}, 3*time.Second,
		func(ctx context.Context, cl pb.GrackleServiceClient, o *history.Op) error {
			_, err := cl.ReleaseSemaphore(ctx, &pb.ReleaseSemaphoreRequest{NamespaceName: ns, SemaphoreName: sem, LeaseId: lease})
			return err
		})
}

func (w *world) refresh(ctx context.Context, rng *rand.Rand, proc int, lease string, ttl int64) *history.Op {
	return w.call(ctx, rng, history.Op{Process: proc, Kind: history.Refresh, Namespace: ns, Lease: lease, TTL: ttl}, 3*time.Second,
		func(ctx context.Context, cl pb.GrackleServiceClient, o *history.Op) error {
			r, err := cl.RefreshSemaphoreLease(ctx, &pb.RefreshSemaphoreLeaseRequest{NamespaceName: ns, LeaseId: lease, TtlSeconds: ttl})
			if err == nil {
				o.ExpiresAt = r.Lease.ExpiresAt
			}
			return err
		})
}

func (w *world) revoke(ctx context.Context, rng *rand.Rand, proc int, sem, lease string) *history.Op {
	return w.call(ctx, rng, history.Op{Process: proc, Kind: history.Revoke, Namespace: ns, Semaphore: sem, Lease: lease}, 3*time.Second,
		func(ctx context.Context, cl pb.GrackleServiceClient, o *history.Op) error {
			_, err := cl.RevokeSemaphoreLease(ctx, &pb.RevokeSemaphoreLeaseRequest{NamespaceName: ns, LeaseId: lease})
			return err
		})
}

func (w *world) get(ctx context.Context, rng *rand.Rand, proc int, sem string) *history.Op {
	return w.call(ctx, rng, history.Op{Process: proc, Kind: history.GetSemaphore, Namespace: ns, Semaphore: sem}, 3*time.Second,
		func(ctx context.Context, cl pb.GrackleServiceClient, o *history.Op) error {
			r, err := cl.GetSemaphore(ctx, &pb.GetSemaphoreRequest{NamespaceName: ns, SemaphoreName: sem})
			if err == nil {
				o.ActiveHolds, o.HoldersCount = r.Semaphore.ActiveHolds, r.Semaphore.ActiveHoldersCount
			}
			return err
		})
}

func (w *world) holders(ctx context.Context, rng *rand.Rand, proc int, sem string) *history.Op {
	return w.call(ctx, rng, history.Op{Process: proc, Kind: history.ListHolders, Namespace: ns, Semaphore: sem}, 3*time.Second,
		func(ctx context.Context, cl pb.GrackleServiceClient, o *history.Op) error {
			r, err := cl.ListSemaphoreHolders(ctx, &pb.ListSemaphoreHoldersRequest{NamespaceName: ns, SemaphoreName: sem, Limit: 250})
			if err == nil {
				for _, x := range r.Holders {
					o.Holders = append(o.Holders, history.Holder{Lease: x.LeaseId, Weight: x.Weight, Token: x.FencingToken})
				}
				sort.Slice(o.Holders, func(i, j int) bool { return o.Holders[i].Lease < o.Holders[j].Lease })
			}
			return err
		})
}

// fenceWrite writes a token to the guarded register (in-process: the
// resource the semaphore protects). It rejects tokens below the highest seen.
func (w *world) fenceWrite(proc int, sem, lease string, token uint64) {
	o := w.rec.begin(history.Op{Process: proc, Kind: history.FenceWrite, Namespace: ns, Semaphore: sem, Lease: lease, Token: token})
	w.regMu.Lock()
	if token >= w.reg[sem] {
		w.reg[sem] = token
		o.Accepted = true
	}
	w.regMu.Unlock()
	w.rec.end(o, nil)
}

// linear is a process of the linearizability workload: one lease with a
// TTL far beyond the run, refreshed, used on one semaphore only.
func (w *world) linear(ctx context.Context, proc int, seed int64) {
	rng := rand.New(rand.NewSource(seed))
	sem := w.linSems[proc%len(w.linSems)]
	const ttl = 300
	gen := 0
	id := func() int { return proc + 1000*gen }
	var lease string
	lastRefresh := time.Now()
	for ctx.Err() == nil {
		if lease == "" {
			if lease = w.createLease(ctx, rng, id(), ttl); lease == "" {
				gen++ // its op may still be pending: a new process takes over
				time.Sleep(100 * time.Millisecond)
				continue
			}
			lastRefresh = time.Now()
		}
		var o *history.Op
		switch x := rng.Intn(100); {
		case time.Since(lastRefresh) > 20*time.Second:
			o = w.refresh(ctx, rng, id(), lease, ttl)
			if o.Outcome == history.OK {
				lastRefresh = time.Now()
			}
		case x < 35:
			timeout := int64(0)
			if rng.Intn(3) == 0 {
				timeout = 1
			}
			o = w.acquire(ctx, rng, id(), sem, lease, 1+rng.Int63n(2), timeout)
		case x < 60:
			o = w.release(ctx, rng, id(), sem, lease)
		case x < 78:
			o = w.get(ctx, rng, id(), sem)
		case x < 96:
			o = w.holders(ctx, rng, id(), sem)
		default:
			o = w.revoke(ctx, rng, id(), sem, lease)
			if o.Outcome != history.Info {
				lease = ""
			}
		}
		if o.Outcome == history.Info {
			gen++
		}
		time.Sleep(time.Duration(rng.Intn(20)) * time.Millisecond)
	}
}

// fenced is a process of the fenced workload: short leases that it
// sometimes lets expire while it still "works", writing to the register.
func (w *world) fenced(ctx context.Context, proc int, seed int64) {
	rng := rand.New(rand.NewSource(seed))
	sem := w.fenSems[proc%len(w.fenSems)]
	gen := 0
	id := func() int { return proc + 1000*gen }
	for ctx.Err() == nil {
		ttl := 1 + rng.Int63n(3)
		lease := w.createLease(ctx, rng, id(), ttl)
		if lease == "" {
			gen++
			time.Sleep(100 * time.Millisecond)
			continue
		}
		o := w.acquire(ctx, rng, id(), sem, lease, 1, 2)
		if o.Outcome == history.Info {
			gen++
			continue
		}
		if o.Outcome == history.OK && o.AcquireOutcome == history.Acquired {
			w.fenceWrite(id(), sem, lease, o.Token)
			// Work for a while; a third of the time longer than the TTL,
			// without refreshing: the lease expires under the worker.
			work := time.Duration(rng.Int63n(int64(time.Duration(ttl) * time.Second / 2)))
			if rng.Intn(3) == 0 {
				work = time.Duration(ttl)*time.Second + 500*time.Millisecond
			} else if rng.Intn(2) == 0 {
				if r := w.refresh(ctx, rng, id(), lease, ttl); r.Outcome == history.Info {
					gen++
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(work):
			}
			w.fenceWrite(id(), sem, lease, o.Token)
			if r := w.release(ctx, rng, id(), sem, lease); r.Outcome == history.Info {
				gen++
			}
		}
		if rng.Intn(2) == 0 {
			if r := w.revoke(ctx, rng, id(), sem, lease); r.Outcome == history.Info {
				gen++
			}
		}
	}
}

// local is a process that asks random nodes what they answer from their
// own state, access check included (GetClusterStatus: any valid token;
// ListSemaphoreWaiters: read on the namespace): a restarted, paused or
// rejoined node must know the workloads' token as soon as it serves.
// Recorded for the access checker; no model reads them.
func (w *world) local(ctx context.Context, proc int, seed int64) {
	rng := rand.New(rand.NewSource(seed))
	sems := append(append([]string(nil), w.linSems...), w.fenSems...)
	for ctx.Err() == nil {
		n := w.c.Nodes[rng.Intn(len(w.c.Nodes))]
		cc := w.c.ConnAs(n.GRPC, w.token)
		if rng.Intn(2) == 0 {
			o := w.rec.begin(history.Op{Process: proc, Kind: history.ClusterStatus, Node: n.ID})
			cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			_, err := pb.NewClusterServiceClient(cc).GetClusterStatus(cctx, &pb.GetClusterStatusRequest{})
			cancel()
			w.rec.end(o, err)
		} else {
			sem := sems[rng.Intn(len(sems))]
			o := w.rec.begin(history.Op{Process: proc, Kind: history.ListWaiters, Namespace: ns, Semaphore: sem, Node: n.ID})
			cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			_, err := pb.NewGrackleServiceClient(cc).ListSemaphoreWaiters(cctx, &pb.ListSemaphoreWaitersRequest{NamespaceName: ns, SemaphoreName: sem, Limit: 10})
			cancel()
			w.rec.end(o, err)
		}
		time.Sleep(time.Duration(20+rng.Intn(40)) * time.Millisecond)
	}
}

// final reads every semaphore (and lock) after healing, recording when
// the cluster first served again.
func (w *world) final(ctx context.Context, h *history.History, within time.Duration, locks bool) {
	rng := rand.New(rand.NewSource(h.Seed + 99))
	deadline := time.Now().Add(within)
	names := append(append([]string(nil), w.linSems...), w.fenSems...)
	for _, s := range names {
		for time.Now().Before(deadline) {
			o := w.holders(ctx, rng, 9999, s)
			if o.Outcome == history.OK {
				if h.ServedAgainAt == 0 {
					h.ServedAgainAt = o.Complete
				}
				w.get(ctx, rng, 9999, s)
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	if locks {
		w.finalLocks(ctx, rng, deadline)
	}
	w.finalWaits(ctx, rng, deadline)
}
