package leader

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc/codes"

	"github.com/grackle-coord/grackle/apierr"

	"github.com/grackle-coord/grackle/fsm"
	fsmpb "github.com/grackle-coord/grackle/proto/grackle/fsm/v1"
)

// fakeRaft appends entries to a log and applies them to a real FSM only
// when the test lets them commit, so the test controls what is in flight.
type fakeRaft struct {
	f       *fsm.FSM
	mu      sync.Mutex
	index   uint64
	pending []*fakeFuture
	all     []*fakeFuture    // every Apply, for failUnresolved
	entries chan *fakeFuture // every Apply, in order
}

type fakeFuture struct {
	data  []byte
	index uint64
	done  chan struct{}
	err   error
	res   any
}

func (f *fakeFuture) Error() error       { <-f.done; return f.err }
func (f *fakeFuture) Response() any      { <-f.done; return f.res }
func (f *fakeFuture) Index() uint64      { return f.index }
func (f *fakeFuture) commit(r *fakeRaft) { f.res = r.f.ApplyBytes(f.index, f.data); close(f.done) }
func (f *fakeFuture) fail(err error)     { f.err = err; close(f.done) }

func newFakeRaft(t *testing.T) *fakeRaft {
	return &fakeRaft{f: fsm.New(fsm.Options{TempDir: t.TempDir()}), entries: make(chan *fakeFuture, 1000)}
}

func (r *fakeRaft) Apply(data []byte, _ time.Duration) raft.ApplyFuture {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.index++
	f := &fakeFuture{data: data, index: r.index, done: make(chan struct{})}
	r.all = append(r.all, f)
	r.entries <- f
	return f
}

// failUnresolved fails every entry not yet committed or failed, so that a
// test that stopped early (t.Fatal) does not leave the packer's shutdown
// waiting for them.
func (r *fakeRaft) failUnresolved() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range r.all {
		select {
		case <-f.done:
		default:
			f.fail(raft.ErrNotLeader)
		}
	}
}

func (r *fakeRaft) next(t *testing.T) *fakeFuture {
	t.Helper()
	select {
	case f := <-r.entries:
		return f
	case <-time.After(10 * time.Second):
		t.Fatal("no entry proposed")
		return nil
	}
}

func encode(t *testing.T, c *fsmpb.Command) []byte {
	t.Helper()
	b, err := fsm.Encode(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func createNS(t *testing.T, name string) []byte {
	return encode(t, &fsmpb.Command{Op: &fsmpb.Command_CreateNamespace{CreateNamespace: &fsmpb.CreateNamespace{Name: name}}})
}

type got struct {
	name string
	res  *fsm.Result
	err  error
}

// Commands that arrive while the in-flight limit is reached go out
// together, in arrival order, as one Batch entry, and each caller gets its
// own command's result.
func TestPackerPacksWhatArrivesWhileInFlight(t *testing.T) {
	r := newFakeRaft(t)
	p := newPacker(r, packerConfig{MaxInFlight: 1})
	defer p.shutdown()
	out := make(chan got, 10)
	propose := func(name string) {
		res, err := p.propose(context.Background(), createNS(t, name), false, true, nil)
		out <- got{name, res, err}
	}
	go propose("first")
	first := r.next(t) // in flight: the limit is reached
	if _, err := fsm.Decode(first.data); err != nil {
		t.Fatal(err)
	}
	// Queue five more, one after another (each is queued before the next
	// starts, so the order is known). A duplicate fails on its own.
	names := []string{"a", "b", "first", "c", "d"}
	for _, n := range names {
		go propose(n)
		waitQueued(t, p, len(names[:indexOf(names, n)+1]))
	}
	first.commit(r)
	if g := <-out; g.name != "first" || g.err != nil || g.res.Err != nil || g.res.Namespace.GetName() != "first" {
		t.Fatalf("first: %+v", g)
	}
	e := r.next(t)
	cmd, err := fsm.Decode(e.data)
	if err != nil || cmd.GetBatch() == nil || len(cmd.GetBatch().Commands) != len(names) {
		t.Fatalf("second entry is not a batch of %d: %v %v", len(names), cmd, err)
	}
	for i, c := range cmd.GetBatch().Commands {
		sub, _ := fsm.Decode(c)
		if sub.GetCreateNamespace().GetName() != names[i] {
			t.Fatalf("batch command %d is %v, want %s", i, sub, names[i])
		}
	}
	e.commit(r)
	for range names {
		g := <-out
		if g.err != nil {
			t.Fatalf("%s: %v", g.name, g.err)
		}
		if g.res.Index != e.index {
			t.Errorf("%s: index %d, want the batch's %d", g.name, g.res.Index, e.index)
		}
		if g.name == "first" {
			if g.res.Err == nil || g.res.Err.Code != fsm.CodeAlreadyExists {
				t.Errorf("duplicate: %v, want AlreadyExists", g.res.Err)
			}
		} else if g.res.Err != nil || g.res.Namespace.GetName() != g.name {
			t.Errorf("%s: got %v %v", g.name, g.res.Namespace, g.res.Err)
		}
	}
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

func waitQueued(t *testing.T, p *packer, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		p.mu.Lock()
		q := len(p.queue)
		p.mu.Unlock()
		if q >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d queued, want %d", q, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// Below the in-flight limit a command goes out at once, alone and as
// itself (no batch wrapper): without load the log is what it always was.
func TestPackerAloneGoesOutAtOnce(t *testing.T) {
	r := newFakeRaft(t)
	p := newPacker(r, packerConfig{MaxInFlight: 2, OrdinaryInFlight: 2})
	defer p.shutdown()
	out := make(chan got, 2)
	go func() {
		res, err := p.propose(context.Background(), createNS(t, "x"), false, true, nil)
		out <- got{"x", res, err}
	}()
	a := r.next(t)
	go func() {
		res, err := p.propose(context.Background(), createNS(t, "y"), false, true, nil)
		out <- got{"y", res, err}
	}()
	b := r.next(t) // proposed while a is still in flight
	for _, e := range []*fakeFuture{a, b} {
		cmd, _ := fsm.Decode(e.data)
		if cmd.GetCreateNamespace() == nil {
			t.Fatalf("entry %d: %v, want the command itself", e.index, cmd)
		}
	}
	b.commit(r)
	a.commit(r)
	for i := 0; i < 2; i++ {
		if g := <-out; g.err != nil || g.res.Err != nil {
			t.Fatalf("%+v", g)
		}
	}
}

// A failed entry fails every command in it with Raft's error; shutdown fails
// what was never handed to Raft with ErrNotLeader (certainly not in the
// log), and propose after shutdown does too.
func TestPackerFailures(t *testing.T) {
	r := newFakeRaft(t)
	p := newPacker(r, packerConfig{MaxInFlight: 1, MaxCommands: 2})
	out := make(chan got, 10)
	propose := func(name string) {
		res, err := p.propose(context.Background(), createNS(t, name), false, true, nil)
		out <- got{name, res, err}
	}
	go propose("n0")
	first := r.next(t)
	for i := 1; i <= 4; i++ {
		go propose(fmt.Sprint("n", i))
	}
	waitQueued(t, p, 4)
	first.fail(raft.ErrLeadershipLost)
	if g := <-out; g.name != "n0" || !errors.Is(g.err, raft.ErrLeadershipLost) {
		t.Fatalf("%+v", g)
	}
	second := r.next(t) // two of the four (MaxCommands); two stay queued
	stopped := make(chan struct{})
	go func() { p.shutdown(); close(stopped) }()
	for {
		p.mu.Lock()
		s := p.stopped
		p.mu.Unlock()
		if s {
			break
		}
		time.Sleep(time.Millisecond)
	}
	second.fail(raft.ErrLeadershipLost)
	<-stopped
	lost, notLeader := 0, 0
	for i := 0; i < 4; i++ {
		g := <-out
		switch {
		case errors.Is(g.err, raft.ErrLeadershipLost):
			lost++
		case errors.Is(g.err, raft.ErrNotLeader):
			notLeader++
		default:
			t.Fatalf("%+v", g)
		}
	}
	if lost != 2 || notLeader != 2 {
		t.Fatalf("%d lost in flight, %d not proposed; want 2 and 2", lost, notLeader)
	}
	if _, err := p.propose(context.Background(), createNS(t, "late"), false, true, nil); !errors.Is(err, raft.ErrNotLeader) {
		t.Fatalf("after shutdown: %v", err)
	}
}

// A caller whose context ends while its command is queued gets
// errNotQueued, and the command never reaches Raft.
func TestPackerCallerGivesUpWhileQueued(t *testing.T) {
	r := newFakeRaft(t)
	p := newPacker(r, packerConfig{MaxInFlight: 1})
	defer p.shutdown()
	out := make(chan got, 2)
	go func() {
		res, err := p.propose(context.Background(), createNS(t, "a"), false, true, nil)
		out <- got{"a", res, err}
	}()
	first := r.next(t)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { res, err := p.propose(ctx, createNS(t, "b"), false, true, nil); out <- got{"b", res, err} }()
	waitQueued(t, p, 1)
	cancel()
	if g := <-out; g.name != "b" || !errors.Is(g.err, errNotQueued) || !errors.Is(g.err, context.Canceled) {
		t.Fatalf("%+v", g)
	}
	first.commit(r)
	if g := <-out; g.err != nil {
		t.Fatal(g.err)
	}
	// The next entry is the next command, not the abandoned one.
	go func() {
		res, err := p.propose(context.Background(), createNS(t, "c"), false, true, nil)
		out <- got{"c", res, err}
	}()
	e := r.next(t)
	if cmd, _ := fsm.Decode(e.data); cmd.GetCreateNamespace().GetName() != "c" {
		t.Fatalf("next entry %v, want c alone", cmd)
	}
	e.commit(r)
	<-out
}

// Every then of an entry runs before any caller of that entry or a later
// one is woken, and the thens run in log order even when a later entry's
// future resolves first.
func TestPackerThenRunsInLogOrderBeforeCallersWake(t *testing.T) {
	r := newFakeRaft(t)
	p := newPacker(r, packerConfig{MaxInFlight: 2, OrdinaryInFlight: 2})
	defer p.shutdown()
	var mu sync.Mutex
	var events []string
	record := func(e string) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
	}
	out := make(chan got, 2)
	propose := func(name string) {
		res, err := p.propose(context.Background(), createNS(t, name), false, true, func(*fsm.Result, error) { record("then " + name) })
		record("woke " + name)
		out <- got{name, res, err}
	}
	go propose("a")
	ea := r.next(t)
	go propose("b")
	eb := r.next(t)
	// b's entry resolves first; a's later.
	eb.res = r.f.ApplyBytes(eb.index, eb.data)
	ea.commit(r)
	close(eb.done)
	for i := 0; i < 2; i++ {
		if g := <-out; g.err != nil {
			t.Fatal(g.err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(events) != 4 {
		t.Fatalf("events %v", events)
	}
	pos := map[string]int{}
	for i, e := range events {
		pos[e] = i
	}
	if !(pos["then a"] < pos["woke a"] && pos["then a"] < pos["then b"] && pos["then b"] < pos["woke b"]) {
		t.Fatalf("events %v: want then a before woke a and then b, then b before woke b", events)
	}
}

// By default an ordinary command waits while one entry is in flight (it
// packs with what arrives meanwhile), and a command that hands permits over
// goes out beside it at once, taking what queued before it, in order.
func TestPackerHandOffTakesTheSecondSlot(t *testing.T) {
	r := newFakeRaft(t)
	p := newPacker(r, packerConfig{})
	defer p.shutdown()
	out := make(chan got, 10)
	propose := func(name string, urgent bool) {
		res, err := p.propose(context.Background(), createNS(t, name), urgent, true, nil)
		out <- got{name, res, err}
	}
	batchOf := func(e *fakeFuture, names ...string) {
		t.Helper()
		cmd, err := fsm.Decode(e.data)
		if err != nil || len(cmd.GetBatch().GetCommands()) != len(names) {
			t.Fatalf("entry %d: %v %v, want a batch of %v", e.index, cmd, err, names)
		}
		for i, c := range cmd.GetBatch().GetCommands() {
			if sub, _ := fsm.Decode(c); sub.GetCreateNamespace().GetName() != names[i] {
				t.Fatalf("entry %d, command %d: %v, want %s", e.index, i, sub, names[i])
			}
		}
	}
	go propose("a", false)
	ea := r.next(t) // alone, at once
	go propose("b", false)
	waitQueued(t, p, 1) // b waits behind a
	go propose("g", true)
	eb := r.next(t) // g hands over: it goes now, beside a, and takes b first
	batchOf(eb, "b", "g")
	go propose("c", false)
	waitQueued(t, p, 1) // two in flight: c waits
	ea.commit(r)
	if g := <-out; g.name != "a" || g.err != nil {
		t.Fatalf("%+v", g)
	}
	// One entry still in flight: c still waits for it, unless a hand-off
	// comes (h), which takes c with it.
	go propose("h", true)
	ec := r.next(t)
	batchOf(ec, "c", "h")
	eb.commit(r)
	ec.commit(r)
	for i := 0; i < 4; i++ {
		if g := <-out; g.err != nil || g.res.Err != nil {
			t.Fatalf("%+v", g)
		}
	}
}

// A full queue refuses a client's command at once (errQueueFull, its then
// run, never proposed) and leaves the queued ones and their order as they
// were; the leader's own commands are queued even then; once the queue
// drains, commands are taken again.
func TestPackerBoundsItsQueue(t *testing.T) {
	r := newFakeRaft(t)
	p := newPacker(r, packerConfig{OrdinaryInFlight: 1, MaxInFlight: 1, MaxQueued: 2})
	defer p.shutdown()
	out := make(chan got, 10)
	propose := func(name string, bounded bool) {
		res, err := p.propose(context.Background(), createNS(t, name), false, bounded, nil)
		out <- got{name, res, err}
	}
	go propose("n0", true)
	first := r.next(t)
	go propose("n1", true)
	waitQueued(t, p, 1)
	go propose("n2", true)
	waitQueued(t, p, 2)
	var thenErr error
	if _, err := p.propose(context.Background(), createNS(t, "n3"), false, true, func(_ *fsm.Result, err error) { thenErr = err }); !errors.Is(err, errQueueFull) || !errors.Is(thenErr, errQueueFull) {
		t.Fatalf("a client's command at a full queue: %v (then: %v), want errQueueFull", err, thenErr)
	}
	go propose("own", false)
	waitQueued(t, p, 3)
	first.commit(r)
	e := r.next(t)
	cmd, err := fsm.Decode(e.data)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range cmd.GetBatch().GetCommands() {
		sub, _ := fsm.Decode(c)
		names = append(names, sub.GetCreateNamespace().GetName())
	}
	if fmt.Sprint(names) != "[n1 n2 own]" {
		t.Fatalf("next entry %v, want [n1 n2 own] in arrival order", names)
	}
	e.commit(r)
	for i := 0; i < 4; i++ {
		if g := <-out; g.err != nil || g.res.Err != nil {
			t.Fatalf("%+v", g)
		}
	}
	go propose("after", true)
	r.next(t).commit(r)
	if g := <-out; g.err != nil {
		t.Fatalf("after the queue drained: %+v", g)
	}
}

// The proposer maps a full queue to ResourceExhausted with reason
// OVERLOADED (nothing was proposed).
func TestQueueFullIsOverloaded(t *testing.T) {
	err := mapProposeError(context.Background(), fmt.Errorf("%w (2 commands wait)", errQueueFull))
	var le *Error
	if !errors.As(err, &le) || le.Code != codes.ResourceExhausted || le.Reason != apierr.Overloaded {
		t.Fatalf("%v", err)
	}
}

// A lazy command (an acquire that will queue behind other waiters) waits
// for the next other command and goes out with it, in arrival order, in
// one entry; it never goes alone while its delay runs.
func TestPackerLazyCommandRidesWithTheNext(t *testing.T) {
	r := newFakeRaft(t)
	p := newPacker(r, packerConfig{LazyDelay: time.Hour})
	defer p.shutdown()
	out := make(chan got, 2)
	go func() {
		res, err := p.proposeLazy(context.Background(), createNS(t, "lazy"), true, nil)
		out <- got{"lazy", res, err}
	}()
	// Wait until the lazy command is queued, then send an ordinary one.
	deadline := time.Now().Add(10 * time.Second)
	for {
		p.mu.Lock()
		n := len(p.queue)
		p.mu.Unlock()
		if n == 1 {
			break
		}
		select {
		case f := <-r.entries:
			f.commit(r)
			t.Fatal("the lazy command went out alone at once")
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the lazy command was never queued")
		}
		time.Sleep(time.Millisecond)
	}
	go func() {
		res, err := p.propose(context.Background(), createNS(t, "next"), false, true, nil)
		out <- got{"next", res, err}
	}()
	f := r.next(t)
	cmd, err := fsm.Decode(f.data)
	if err != nil {
		t.Fatal(err)
	}
	b := cmd.GetBatch().GetCommands()
	if len(b) != 2 {
		t.Fatalf("the first entry holds %d commands, want the lazy one and the next together", max(len(b), 1))
	}
	for i, want := range []string{"lazy", "next"} {
		c, err := fsm.Decode(b[i])
		if err != nil || c.GetCreateNamespace().GetName() != want {
			t.Fatalf("command %d of the entry is %v (%v), want %s", i, c.GetCreateNamespace().GetName(), err, want)
		}
	}
	f.commit(r)
	for range 2 {
		g := <-out
		if g.err != nil || g.res == nil || g.res.Err != nil {
			t.Fatalf("%s: %+v", g.name, g)
		}
	}
}

// Alone, a lazy command goes out by itself once its delay is up.
func TestPackerLazyCommandGoesAloneAfterItsDelay(t *testing.T) {
	r := newFakeRaft(t)
	p := newPacker(r, packerConfig{LazyDelay: 5 * time.Millisecond})
	defer p.shutdown()
	done := make(chan error, 1)
	go func() {
		_, err := p.proposeLazy(context.Background(), createNS(t, "alone"), true, nil)
		done <- err
	}()
	f := r.next(t)
	if cmd, err := fsm.Decode(f.data); err != nil || cmd.GetCreateNamespace().GetName() != "alone" {
		t.Fatalf("entry %v (%v), want the lazy command alone", cmd, err)
	}
	f.commit(r)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// holdCase starts a packer with the hold on and only a target to end it
// (no time bound), proposes "first" alone, queues "queued" behind it, and
// commits the first entry. It returns once the hold is active with
// "queued" still waiting, and the first caller has its result.
func holdCase(t *testing.T, cfg packerConfig) (*fakeRaft, *packer, chan got) {
	t.Helper()
	r := newFakeRaft(t)
	p := newPacker(r, cfg)
	t.Cleanup(p.shutdown)
	t.Cleanup(r.failUnresolved) // runs first
	out := make(chan got, 8)
	proposeAsync(t, p, out, "first", false)
	first := r.next(t)
	proposeAsync(t, p, out, "queued", false)
	waitQueued(t, p, 1)
	first.commit(r)
	if g := <-out; g.name != "first" || g.err != nil {
		t.Fatalf("first: %+v", g)
	}
	return r, p, out
}

// entryNames lists the namespaces an entry creates, in order.
func entryNames(t *testing.T, f *fakeFuture) []string {
	t.Helper()
	cmd, err := fsm.Decode(f.data)
	if err != nil {
		t.Fatal(err)
	}
	if cmd.GetBatch() == nil {
		return []string{cmd.GetCreateNamespace().GetName()}
	}
	var names []string
	for _, b := range cmd.GetBatch().GetCommands() {
		c, err := fsm.Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, c.GetCreateNamespace().GetName())
	}
	return names
}

func proposeAsync(t *testing.T, p *packer, out chan got, name string, urgent bool) {
	go func() {
		res, err := p.propose(context.Background(), createNS(t, name), urgent, true, nil)
		out <- got{name, res, err}
	}()
}

// When an entry commits, what was queued meanwhile waits for that entry's
// caller to send its next command, and both go out in one entry: without
// the hold "queued" would go alone at once and "next" would wait a whole
// commit behind it. A command that hands permits over ends the hold at
// once, and takes what was queued before it along.
func TestPackerHoldWaitsForTheCallersOfTheEntry(t *testing.T) {
	for _, c := range []struct {
		next   string
		urgent bool
	}{{"next", false}, {"urgent", true}} {
		var mu sync.Mutex
		var entries []EntryEvent
		onEntry := func(e EntryEvent) { mu.Lock(); entries = append(entries, e); mu.Unlock() }
		r, p, out := holdCase(t, packerConfig{Hold: time.Hour, HoldIdle: time.Hour, OnEntry: onEntry})
		proposeAsync(t, p, out, c.next, c.urgent)
		f := r.next(t)
		if got, want := fmt.Sprint(entryNames(t, f)), "[queued "+c.next+"]"; got != want {
			t.Fatalf("the entry after the hold holds %v, want %v", got, want)
		}
		mu.Lock()
		if len(entries) != 2 || entries[0].Commands != 1 || entries[0].Held != 0 || entries[1].Commands != 2 || entries[1].Held <= 0 {
			t.Errorf("entry events %+v, want the first alone and not held, then two commands after a hold", entries)
		}
		mu.Unlock()
		f.commit(r)
		for range 2 {
			if g := <-out; g.err != nil || g.res == nil || g.res.Err != nil {
				t.Fatalf("%s: %+v", g.name, g)
			}
		}
	}
}

// When no caller comes back, the hold ends after HoldIdle without an
// arrival, and after Hold in any case.
func TestPackerHoldEndsWhenNoOneComes(t *testing.T) {
	for _, cfg := range []packerConfig{
		{Hold: time.Hour, HoldIdle: 5 * time.Millisecond},
		{Hold: 5 * time.Millisecond, HoldIdle: time.Hour},
	} {
		r, _, out := holdCase(t, cfg)
		f := r.next(t)
		if got := entryNames(t, f); fmt.Sprint(got) != "[queued]" {
			t.Fatalf("%+v: entry %v, want [queued]", cfg, got)
		}
		f.commit(r)
		if g := <-out; g.err != nil {
			t.Fatalf("%+v: %+v", cfg, g)
		}
	}
}

// A lone caller is never held: with nothing queued when its entry commits,
// its next command is all the hold waits for, so it goes out at once.
func TestPackerHoldNeverDelaysALoneCaller(t *testing.T) {
	r := newFakeRaft(t)
	p := newPacker(r, packerConfig{Hold: time.Hour, HoldIdle: time.Hour})
	t.Cleanup(p.shutdown)
	t.Cleanup(r.failUnresolved)
	out := make(chan got, 1)
	for _, name := range []string{"a", "b", "c"} {
		proposeAsync(t, p, out, name, false)
		f := r.next(t) // fails after 10 s if held
		if got := entryNames(t, f); fmt.Sprint(got) != "["+name+"]" {
			t.Fatalf("entry %v, want [%s]", got, name)
		}
		f.commit(r)
		if g := <-out; g.err != nil {
			t.Fatalf("%+v", g)
		}
	}
}

// Off (negative), nothing is held: the queued command goes out alone as
// soon as the entry before it commits.
func TestPackerHoldOff(t *testing.T) {
	var mu sync.Mutex
	var entries []EntryEvent
	onEntry := func(e EntryEvent) { mu.Lock(); entries = append(entries, e); mu.Unlock() }
	// HoldIdle an hour: a hold, had it begun, would show in Held.
	r, _, out := holdCase(t, packerConfig{Hold: -1, HoldIdle: time.Hour, OnEntry: onEntry})
	f := r.next(t)
	if got := entryNames(t, f); fmt.Sprint(got) != "[queued]" {
		t.Fatalf("entry %v, want [queued]", got)
	}
	f.commit(r)
	<-out
	mu.Lock()
	defer mu.Unlock()
	for _, e := range entries {
		if e.Held != 0 {
			t.Fatalf("entry events %+v: an entry was held with the hold off", entries)
		}
	}
}
