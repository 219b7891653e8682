package runner

import (
	"context"
	"fmt"
	"math/rand"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/grackle-coord/grackle/apierr"
	"github.com/grackle-coord/grackle/jepsen/history"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// The wait-group and barrier workloads (docs/API.md, Wait groups,
// Barriers). Every call goes to a node drawn at random, like the other
// workloads', and is recorded with what its answer showed; the checkers
// (check/waitgroups.go, check/barriers.go) read them.
//
// Wait groups: one process keeps three groups going (counter 2-8, or a
// third of them 8-20 with expires_at 0.15-0.9 s away, racing their
// completions; a third with one job id more than the counter, so that
// some batches are refused "too many jobs"); completers send batches of
// 1-3 job ids drawn from a group's ids (so retries of completed jobs, and
// a job twice in one batch, are common); a waiter waits for a group (1
// s), a reader reads the recent groups and their completed jobs. After
// healing, the latest 40 groups are read again.
//
// Barriers: each barrier has expected_processes 3 and three processes
// that arrive at their generation, wait for it to trip (2 s; on
// TIMED_OUT they arrive again, which must count nothing twice), and
// "work" 0-300 ms before the next generation; an arrival of unknown
// outcome is sent again with the same process_id and generation. One
// observer per barrier reads it, lists the participants of the current
// and the previous generation, and waits for the current one to trip.

const (
	wgActive   = 3
	wgPageSize = 250
)

// wgRun is a wait group the workload created.
type wgRun struct {
	name    string
	counter int64
	pool    int
	mu      sync.Mutex
	done    bool
}

func (g *wgRun) finished() bool { g.mu.Lock(); defer g.mu.Unlock(); return g.done }
func (g *wgRun) finish()        { g.mu.Lock(); g.done = true; g.mu.Unlock() }

// waitWorld is the shared state of the wait workloads.
type waitWorld struct {
	mu       sync.Mutex
	n        int
	groups   []*wgRun
	barriers []string
}

func (ww *waitWorld) active() []*wgRun {
	ww.mu.Lock()
	defer ww.mu.Unlock()
	var out []*wgRun
	for _, g := range ww.groups {
		if !g.finished() {
			out = append(out, g)
		}
	}
	return out
}

func (ww *waitWorld) recent(k int) []*wgRun {
	ww.mu.Lock()
	defer ww.mu.Unlock()
	return append([]*wgRun(nil), ww.groups[max(0, len(ww.groups)-k):]...)
}

func (ww *waitWorld) byName(name string) *wgRun {
	ww.mu.Lock()
	defer ww.mu.Unlock()
	for _, g := range ww.groups {
		if g.name == name {
			return g
		}
	}
	return nil
}

func wgStatus(s pb.WaitGroupStatus) string {
	return strings.TrimPrefix(s.String(), "WAIT_GROUP_STATUS_")
}

func wgView(g *pb.WaitGroup) *history.WaitGroupView {
	if g == nil {
		return nil
	}
	return &history.WaitGroupView{Counter: g.Counter, Completed: g.CompletedJobs, Status: wgStatus(g.Status),
		ExpiresAt: g.ExpiresAt, FinishedAt: g.FinishedAt, LastActivity: g.LastActivityAt}
}

func barrierView(b *pb.Barrier) *history.BarrierView {
	if b == nil {
		return nil
	}
	return &history.BarrierView{Expected: b.ExpectedProcesses, Arrived: b.ArrivedProcesses, Generation: b.Generation, LastActivity: b.LastActivityAt}
}

// noteRefusal keeps what a refusal's ErrorInfo names: a wait group's
// status, a barrier's current generation.
func noteRefusal(o *history.Op, err error) {
	md := apierr.Info(err).GetMetadata()
	if s := md[apierr.KeyStatus]; s != "" {
		o.ErrStatus = strings.TrimPrefix(s, "WAIT_GROUP_STATUS_")
	}
	if g, e := strconv.ParseInt(md[apierr.KeyCurrentGeneration], 10, 64); e == nil {
		o.CurrentGeneration = g
	}
}

func (w *world) createWaitGroup(ctx context.Context, rng *rand.Rand, proc int, name string, counter, expiresAt int64) *history.Op {
	return w.call(ctx, rng, history.Op{Process: proc, Kind: history.WGCreate, Namespace: ns, WaitGroup: name, Counter: counter, ExpiresAt: expiresAt}, 3*time.Second,
		func(ctx context.Context, cl pb.GrackleServiceClient, o *history.Op) error {
			r, err := cl.CreateWaitGroup(ctx, &pb.CreateWaitGroupRequest{NamespaceName: ns, WaitGroupName: name, Counter: counter, ExpiresAt: expiresAt})
			if err == nil {
				o.WG = wgView(r.WaitGroup)
			}
			return err
		})
}

func (w *world) completeJobs(ctx context.Context, rng *rand.Rand, proc int, name string, jobs []string) *history.Op {
	return w.call(ctx, rng, history.Op{Process: proc, Kind: history.WGComplete, Namespace: ns, WaitGroup: name, Jobs: jobs}, 3*time.Second,
		func(ctx context.Context, cl pb.GrackleServiceClient, o *history.Op) error {
			req := &pb.CompleteJobsFromWaitGroupRequest{NamespaceName: ns, WaitGroupName: name}
			for _, j := range jobs {
				req.Jobs = append(req.Jobs, &pb.WaitGroupJob{JobId: j})
			}
			r, err := cl.CompleteJobsFromWaitGroup(ctx, req)
			if err == nil {
				o.WG, o.Newly = wgView(r.WaitGroup), r.NewlyCompleted
			} else {
				noteRefusal(o, err)
			}
			return err
		})
}

func (w *world) getWaitGroup(ctx context.Context, rng *rand.Rand, proc int, name string) *history.Op {
	return w.call(ctx, rng, history.Op{Process: proc, Kind: history.WGGet, Namespace: ns, WaitGroup: name}, 3*time.Second,
		func(ctx context.Context, cl pb.GrackleServiceClient, o *history.Op) error {
			r, err := cl.GetWaitGroup(ctx, &pb.GetWaitGroupRequest{NamespaceName: ns, WaitGroupName: name})
			if err == nil {
				o.WG = wgView(r.WaitGroup)
			}
			return err
		})
}

func (w *world) waitForWaitGroup(ctx context.Context, rng *rand.Rand, proc int, name string, timeout int64) *history.Op {
	return w.call(ctx, rng, history.Op{Process: proc, Kind: history.WGWait, Namespace: ns, WaitGroup: name, Timeout: timeout},
		time.Duration(timeout)*time.Second+2*time.Second,
		func(ctx context.Context, cl pb.GrackleServiceClient, o *history.Op) error {
			r, err := cl.WaitForWaitGroup(ctx, &pb.WaitForWaitGroupRequest{NamespaceName: ns, WaitGroupName: name, TimeoutSeconds: timeout})
			if err == nil {
				o.WG = wgView(r.WaitGroup)
				o.WaitOutcome = strings.TrimPrefix(r.Outcome.String(), "WAIT_GROUP_WAIT_OUTCOME_")
			}
			return err
		})
}

func (w *world) listCompletedJobs(ctx context.Context, rng *rand.Rand, proc int, name string) *history.Op {
	return w.call(ctx, rng, history.Op{Process: proc, Kind: history.WGJobs, Namespace: ns, WaitGroup: name}, 3*time.Second,
		func(ctx context.Context, cl pb.GrackleServiceClient, o *history.Op) error {
			r, err := cl.ListWaitGroupCompletedJobs(ctx, &pb.ListWaitGroupCompletedJobsRequest{NamespaceName: ns, WaitGroupName: name, Limit: wgPageSize})
			if err == nil {
				for _, j := range r.Jobs {
					o.Listed = append(o.Listed, history.WaitGroupJob{ID: j.JobId, CompletedAt: j.CompletedAt})
				}
				o.Truncated = r.NextPaginationToken != ""
			}
			return err
		})
}

func (w *world) createBarrier(ctx context.Context, rng *rand.Rand, proc int, name string, expected int64) *history.Op {
	return w.call(ctx, rng, history.Op{Process: proc, Kind: history.BarrierCreate, Namespace: ns, Barrier: name, Expected: expected}, 3*time.Second,
		func(ctx context.Context, cl pb.GrackleServiceClient, o *history.Op) error {
			r, err := cl.CreateBarrier(ctx, &pb.CreateBarrierRequest{NamespaceName: ns, BarrierName: name, ExpectedProcesses: expected})
			if err == nil {
				o.B = barrierView(r.Barrier)
			}
			return err
		})
}

func (w *world) arrive(ctx context.Context, rng *rand.Rand, proc int, name, process string, gen int64) *history.Op {
	return w.call(ctx, rng, history.Op{Process: proc, Kind: history.BarrierArrive, Namespace: ns, Barrier: name, BarrierProcess: process, Generation: gen}, 3*time.Second,
		func(ctx context.Context, cl pb.GrackleServiceClient, o *history.Op) error {
			r, err := cl.ArriveAtBarrier(ctx, &pb.ArriveAtBarrierRequest{NamespaceName: ns, BarrierName: name, ProcessId: process, ExpectedGeneration: gen})
			if err == nil {
				o.B, o.AllArrived = barrierView(r.Barrier), r.AllArrived
			} else {
				noteRefusal(o, err)
			}
			return err
		})
}

func (w *world) waitAtBarrier(ctx context.Context, rng *rand.Rand, proc int, name string, gen, timeout int64) *history.Op {
	return w.call(ctx, rng, history.Op{Process: proc, Kind: history.BarrierWait, Namespace: ns, Barrier: name, Generation: gen, Timeout: timeout},
		time.Duration(timeout)*time.Second+2*time.Second,
		func(ctx context.Context, cl pb.GrackleServiceClient, o *history.Op) error {
			r, err := cl.WaitAtBarrier(ctx, &pb.WaitAtBarrierRequest{NamespaceName: ns, BarrierName: name, ExpectedGeneration: gen, TimeoutSeconds: timeout})
			if err == nil {
				o.B = barrierView(r.Barrier)
				o.WaitOutcome = strings.TrimPrefix(r.Outcome.String(), "BARRIER_WAIT_OUTCOME_")
			} else {
				noteRefusal(o, err)
			}
			return err
		})
}

func (w *world) getBarrier(ctx context.Context, rng *rand.Rand, proc int, name string) *history.Op {
	return w.call(ctx, rng, history.Op{Process: proc, Kind: history.BarrierGet, Namespace: ns, Barrier: name}, 3*time.Second,
		func(ctx context.Context, cl pb.GrackleServiceClient, o *history.Op) error {
			r, err := cl.GetBarrier(ctx, &pb.GetBarrierRequest{NamespaceName: ns, BarrierName: name})
			if err == nil {
				o.B = barrierView(r.Barrier)
			}
			return err
		})
}

func (w *world) participants(ctx context.Context, rng *rand.Rand, proc int, name string, gen int64) *history.Op {
	return w.call(ctx, rng, history.Op{Process: proc, Kind: history.BarrierParticipants, Namespace: ns, Barrier: name, Generation: gen}, 3*time.Second,
		func(ctx context.Context, cl pb.GrackleServiceClient, o *history.Op) error {
			r, err := cl.ListBarrierParticipants(ctx, &pb.ListBarrierParticipantsRequest{NamespaceName: ns, BarrierName: name, Generation: gen, Limit: wgPageSize})
			if err == nil {
				o.ListedGeneration = r.Generation
				for _, p := range r.Participants {
					o.Participants = append(o.Participants, history.Participant{Process: p.ProcessId, Generation: p.Generation, ArrivedAt: p.ArrivedAt})
				}
				o.Truncated = r.NextPaginationToken != ""
			} else {
				noteRefusal(o, err)
			}
			return err
		})
}

// observeWG marks a group finished when an answer shows it so.
func (w *world) observeWG(o *history.Op) {
	g := w.waits.byName(o.WaitGroup)
	if g == nil {
		return
	}
	if o.WG != nil && o.WG.Status != history.WGActive && o.WG.Status != "" || o.Reason == apierr.WaitGroupNotActive || o.Code == "NotFound" {
		g.finish()
	}
}

// idle sleeps between calls; false when the run is over.
func idle(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// wgCreator keeps wgActive groups going.
func (w *world) wgCreator(ctx context.Context, proc int, seed int64) {
	rng := rand.New(rand.NewSource(seed))
	gen := 0
	for ctx.Err() == nil {
		if len(w.waits.active()) >= wgActive {
			idle(ctx, 20*time.Millisecond)
			continue
		}
		w.waits.mu.Lock()
		w.waits.n++
		g := &wgRun{name: fmt.Sprintf("wg-%d", w.waits.n), counter: 2 + rng.Int63n(7)}
		w.waits.mu.Unlock()
		var exp int64
		if rng.Intn(3) == 0 {
			// Expires soon, racing its completions. The client's clock is
			// only the request's; the leader's is the one checked.
			g.counter = 8 + rng.Int63n(13)
			exp = time.Now().Add(time.Duration(150+rng.Intn(750)) * time.Millisecond).UnixNano()
		}
		g.pool = int(g.counter)
		if rng.Intn(3) == 0 {
			g.pool++ // one job id too many: some batches are refused "too many jobs"
		}
		o := w.createWaitGroup(ctx, rng, proc+1000*gen, g.name, g.counter, exp)
		switch o.Outcome {
		case history.OK:
			w.waits.mu.Lock()
			w.waits.groups = append(w.waits.groups, g)
			w.waits.mu.Unlock()
		case history.Info:
			gen++ // the group may exist: never used (a new name next)
			idle(ctx, 100*time.Millisecond)
		default:
			idle(ctx, 100*time.Millisecond)
		}
	}
}

// wgCompleter sends batches of jobs to the active groups.
func (w *world) wgCompleter(ctx context.Context, proc int, seed int64) {
	rng := rand.New(rand.NewSource(seed))
	gen := 0
	for ctx.Err() == nil {
		as := w.waits.active()
		if len(as) == 0 {
			idle(ctx, 20*time.Millisecond)
			continue
		}
		g := as[rng.Intn(len(as))]
		var jobs []string
		for k := 1 + rng.Intn(3); k > 0; k-- {
			jobs = append(jobs, fmt.Sprintf("j%d", rng.Intn(g.pool)))
		}
		o := w.completeJobs(ctx, rng, proc+1000*gen, g.name, jobs)
		w.observeWG(o)
		if o.Outcome == history.Info {
			gen++
		}
		idle(ctx, time.Duration(rng.Intn(30))*time.Millisecond)
	}
}

// wgWatcher waits for active groups (1 s), and reads recent groups and
// their jobs.
func (w *world) wgWatcher(ctx context.Context, proc int, seed int64, waiter bool) {
	rng := rand.New(rand.NewSource(seed))
	for ctx.Err() == nil {
		var o *history.Op
		if waiter {
			as := w.waits.active()
			if len(as) == 0 {
				idle(ctx, 20*time.Millisecond)
				continue
			}
			o = w.waitForWaitGroup(ctx, rng, proc, as[rng.Intn(len(as))].name, 1)
		} else {
			rs := w.waits.recent(5)
			if len(rs) == 0 {
				idle(ctx, 20*time.Millisecond)
				continue
			}
			g := rs[rng.Intn(len(rs))]
			if rng.Intn(2) == 0 {
				o = w.getWaitGroup(ctx, rng, proc, g.name)
			} else {
				o = w.listCompletedJobs(ctx, rng, proc, g.name)
			}
		}
		w.observeWG(o)
		idle(ctx, time.Duration(5+rng.Intn(20))*time.Millisecond)
	}
}

// barrierProc is one of a barrier's expected processes.
func (w *world) barrierProc(ctx context.Context, proc int, seed int64, name, process string) {
	rng := rand.New(rand.NewSource(seed))
	gen := 0
	id := func() int { return proc + 1000*gen }
	g, waiting := int64(1), false
	learn := func(o *history.Op) {
		if o.CurrentGeneration > g {
			g, waiting = o.CurrentGeneration, false
		}
	}
	for ctx.Err() == nil {
		var o *history.Op
		work := time.Duration(rng.Intn(10)) * time.Millisecond
		if waiting {
			o = w.waitAtBarrier(ctx, rng, id(), name, g, 2)
			learn(o)
			switch {
			case o.WaitOutcome == history.WaitTripped:
				g, waiting = g+1, false
				work = time.Duration(rng.Intn(300)) * time.Millisecond
			case o.WaitOutcome == history.WaitTimedOut:
				waiting = false // arrive again: it must count nothing twice
			}
		} else {
			o = w.arrive(ctx, rng, id(), name, process, g)
			learn(o)
			switch {
			case o.Outcome == history.OK && o.AllArrived:
				g = o.Generation + 1
				work = time.Duration(rng.Intn(300)) * time.Millisecond
			case o.Outcome == history.OK:
				waiting = true
			}
			// Indeterminate: sent again, same process_id and generation.
		}
		if o.Outcome == history.Info {
			gen++
		}
		idle(ctx, work)
	}
}

// barrierObserver reads a barrier, lists the participants of its current
// and previous generation, and waits for the current one to trip.
func (w *world) barrierObserver(ctx context.Context, proc int, seed int64, name string) {
	rng := rand.New(rand.NewSource(seed))
	seen := int64(1)
	for ctx.Err() == nil {
		var o *history.Op
		switch rng.Intn(4) {
		case 0:
			o = w.getBarrier(ctx, rng, proc, name)
		case 1:
			o = w.participants(ctx, rng, proc, name, 0)
		case 2:
			o = w.participants(ctx, rng, proc, name, max(1, seen-1))
		default:
			o = w.waitAtBarrier(ctx, rng, proc, name, seen, 1)
		}
		if o.B != nil {
			seen = max(seen, o.B.Generation)
		}
		if o.Kind == history.BarrierParticipants && o.Generation == 0 {
			seen = max(seen, o.ListedGeneration)
		}
		seen = max(seen, o.CurrentGeneration)
		idle(ctx, time.Duration(10+rng.Intn(30))*time.Millisecond)
	}
}

// setupBarriers creates the barriers (recorded: the checker reads
// expected_processes from the create), retrying until one is certain.
func (w *world) setupBarriers(ctx context.Context, rng *rand.Rand, n int) error {
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("b-%d", i)
		var last *history.Op
		for try := 0; try < 50; try++ {
			last = w.createBarrier(ctx, rng, 980, name, 3)
			if last.Outcome == history.OK || last.Code == "AlreadyExists" {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if last.Outcome != history.OK && last.Code != "AlreadyExists" {
			return fmt.Errorf("setup barrier %s: %s", name, last.Error)
		}
		w.waits.barriers = append(w.waits.barriers, name)
	}
	return nil
}

// startWaits starts the wait workloads' processes: completers completers
// (with the creator, a waiter and a reader), and three processes and an
// observer per barrier.
func (w *world) startWaits(ctx context.Context, wg *sync.WaitGroup, seed int64, completers int) {
	spawn := func(fn func()) { wg.Add(1); go func() { defer wg.Done(); fn() }() }
	if completers > 0 {
		spawn(func() { w.wgCreator(ctx, 700, seed+700*7919) })
		for i := 0; i < completers; i++ {
			p := 710 + i
			spawn(func() { w.wgCompleter(ctx, p, seed+int64(p)*7919) })
		}
		spawn(func() { w.wgWatcher(ctx, 740, seed+740*7919, true) })
		spawn(func() { w.wgWatcher(ctx, 741, seed+741*7919, false) })
	}
	for bi, name := range w.waits.barriers {
		for k := 0; k < 3; k++ {
			p := 900 + 10*bi + k
			name, process := name, fmt.Sprintf("%s-p%d", name, k)
			spawn(func() { w.barrierProc(ctx, p, seed+int64(p)*7919, name, process) })
		}
		p := 909 + 10*bi
		spawn(func() { w.barrierObserver(ctx, p, seed+int64(p)*7919, name) })
	}
}

// finalWaits reads the latest wait groups (and their jobs) and every barrier (and
// the participants of its two kept generations) after healing.
func (w *world) finalWaits(ctx context.Context, rng *rand.Rand, deadline time.Time) {
	retry := func(fn func() *history.Op) *history.Op {
		var o *history.Op
		for time.Now().Before(deadline) {
			if o = fn(); o.Outcome == history.OK || o.Code == "NotFound" {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		return o
	}
	// The latest groups (during a long run the creator makes hundreds;
	// every read during the run was checked already).
	for _, g := range w.waits.recent(40) {
		retry(func() *history.Op { return w.getWaitGroup(ctx, rng, 9999, g.name) })
		retry(func() *history.Op { return w.listCompletedJobs(ctx, rng, 9999, g.name) })
	}
	for _, b := range w.waits.barriers {
		o := retry(func() *history.Op { return w.getBarrier(ctx, rng, 9999, b) })
		retry(func() *history.Op { return w.participants(ctx, rng, 9999, b, 0) })
		if o != nil && o.B != nil && o.B.Generation > 1 {
			retry(func() *history.Op { return w.participants(ctx, rng, 9999, b, o.B.Generation-1) })
		}
	}
}
