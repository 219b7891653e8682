package fsm

import (
	"sync"
	"testing"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/encoding/protowire"

	fsmpb "github.com/grackle-coord/grackle/proto/grackle/fsm/v1"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// fuzzBase is a small state the fuzzed commands can act on: the names the
// seed corpus (genLog) uses. Built once; each call returns an FSM on an
// O(1) copy-on-write clone of it.
func fuzzBase() *FSM {
	fuzzBaseOnce.Do(func() { fuzzBaseState = buildFuzzBase().st })
	return &FSM{st: fuzzBaseState.clone()}
}

var (
	fuzzBaseOnce  sync.Once
	fuzzBaseState *state
)

func buildFuzzBase() *FSM {
	f := New(Options{})
	base := []*fsmpb.Command{cNS("a"), cNS("b"), cSem("a", "s", 4), cSem("a", "t", 3), cSem("b", "s", 5)}
	for i := 0; i < genLeases; i++ {
		base = append(base, cLease("a", lid(i), "p", 300), cLease("b", lid(i), "q", 300))
	}
	base = append(base, cAcq("a", "s", lid(0), 2), cAcq("a", "t", lid(1), 3), cAcq("b", "s", lid(0), 1))
	for i, c := range base {
		c.Now = epoch
		if r := f.ApplyCommand(uint64(i+1), c); r.Err != nil {
			panic(r.Err)
		}
	}
	return f
}

const fuzzBaseIndex = 100

// splitFrames cuts data into varint-length-prefixed frames (the last one
// takes whatever is left).
func splitFrames(data []byte) [][]byte {
	var out [][]byte
	for len(data) > 0 && len(out) < 64 {
		n, k := protowire.ConsumeVarint(data)
		if k < 0 || n > uint64(len(data)-k) {
			out = append(out, data)
			break
		}
		out = append(out, data[k:k+int(n)])
		data = data[k+int(n):]
	}
	return out
}

func frame(cmds ...[]byte) []byte {
	var b []byte
	for _, c := range cmds {
		b = protowire.AppendVarint(b, uint64(len(c)))
		b = append(b, c...)
	}
	return b
}

// fuzzReads exercises every read on the names the corpus uses.
func fuzzReads(t *testing.T, f *FSM, now int64) {
	f.ListNamespaces(0, "")
	for _, ns := range genNS {
		f.ListWaitGroups(ns, 2, "", now)
		f.ListBarriers(ns, 2, "")
		for _, g := range wmGroups {
			w, err := f.GetWaitGroup(ns, g, now)
			if err == nil && (w.CompletedJobs > w.Counter || (w.Status == pb.WaitGroupStatus_WAIT_GROUP_STATUS_ACTIVE) != (w.FinishedAt == 0)) {
				t.Fatalf("%s/%s: %v", ns, g, w)
			}
			f.ListWaitGroupCompletedJobs(ns, g, 2, "", now)
		}
		for _, b := range wmBarriers {
			x, err := f.GetBarrier(ns, b)
			if err == nil && (x.ArrivedProcesses >= x.ExpectedProcesses || x.Generation < 1) {
				t.Fatalf("%s/%s: %v", ns, b, x)
			}
			f.ListBarrierParticipants(ns, b, 0, 2, "")
		}
	}
	for _, ns := range genNS {
		f.GetNamespace(ns)
		f.ListSemaphores(ns, 2, "", now)
		f.ListSemaphoreLeases(ns, "", 2, "", now)
		f.ListSemaphoreLeases(ns, "p", 2, "", now)
		for _, s := range genSems {
			sv, err := f.GetSemaphore(ns, s, now)
			if err == nil && sv.ActiveHolds > sv.Permits {
				t.Fatalf("%s/%s: active_holds %d > permits %d", ns, s, sv.ActiveHolds, sv.Permits)
			}
			p, err := f.ListSemaphoreHolders(ns, s, 3, "", now)
			if err == nil && p.Next != "" {
				f.ListSemaphoreHolders(ns, s, 3, p.Next, now)
			}
			for _, h := range p.Items {
				if h.ExpiresAt <= now {
					t.Fatalf("%s/%s: expired holder listed %v", ns, s, h)
				}
			}
		}
	}
}

// FuzzApply: arbitrary bytes, as one entry and as a sequence of entries
// (one by one, and in one batch), never panic through the Raft adapter,
// the invariants (every record's checks included: check) hold after every
// entry, and an entry the state machine cannot apply is rejected with no
// effect and counted. The seeds are valid encoded commands (and some cut
// short), which the fuzzer mutates.
//
//	go test -run '^$' -fuzz=FuzzApply -fuzztime=60s ./fsm/
func FuzzApply(f *testing.F) {
	log := genLog(1, 300)
	for i, c := range log {
		b, err := Encode(c)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		if i%7 == 0 {
			f.Add(b[:len(b)/2]) // cut short: does not decode
		}
		if i+3 <= len(log) && i%5 == 0 {
			var seq [][]byte
			for _, c := range log[i : i+3] {
				b, _ := Encode(c)
				seq = append(seq, b)
			}
			f.Add(frame(seq...))
		}
	}
	for i, c := range genLockLog(1, 60) {
		b, err := Encode(c)
		if err != nil {
			f.Fatal(err)
		}
		if i%3 == 0 {
			f.Add(b)
		}
	}
	var waitLog []*fsmpb.Command
	if err := waitSequence(1, 120, nil, &waitLog); err != nil {
		f.Fatal(err)
	}
	for i, c := range waitLog {
		b, err := Encode(c)
		if err != nil {
			f.Fatal(err)
		}
		if i%3 == 0 {
			f.Add(b)
		}
	}
	f.Add([]byte{})
	f.Add(withUnknownOp(nil))
	f.Fuzz(func(t *testing.T, data []byte) {
		// The whole input as one entry.
		a := fuzzBase()
		r := a.ApplyBytes(fuzzBaseIndex, data)
		if r == nil {
			t.Fatal("nil result")
		}
		if err := a.CheckInvariants(); err != nil {
			t.Fatalf("one entry: %v", err)
		}
		// The input as a sequence of entries, applied to two FSMs: same
		// results, same state (no dependence on map order or pointers).
		b, c := fuzzBase(), fuzzBase()
		frames := splitFrames(data)
		results := make([]string, len(frames))
		var rejected uint64
		for i, fr := range frames {
			idx := uint64(fuzzBaseIndex + i)
			rb, rc := b.ApplyBytes(idx, fr), c.ApplyBytes(idx, fr)
			if err := b.CheckInvariants(); err != nil {
				t.Fatalf("entry %d: %v", i, err)
			}
			if rb.Err != nil && rb.Err.Code == CodeInternal {
				if rb.Acquired || len(rb.Grants) > 0 || len(rb.Batch) > 0 || !rb.Rejected {
					t.Fatalf("entry %d: a rejected entry with effects: %s", i, resultString(rb))
				}
				rejected++
			}
			results[i] = resultString(rb)
			if results[i] != resultString(rc) {
				t.Fatalf("entry %d: results differ:\n%s\n%s", i, results[i], resultString(rc))
			}
		}
		if dumpState(b) != dumpState(c) {
			t.Fatal("states differ")
		}
		if b.RejectedEntries() != rejected {
			t.Fatalf("%d entries rejected, %d counted", rejected, b.RejectedEntries())
		}
		// The same entries in one batch through the Raft adapter, as a
		// follower applies them: the same results and the same state.
		d := fuzzBase()
		logs := make([]*raft.Log, len(frames))
		for i, fr := range frames {
			logs[i] = &raft.Log{Index: uint64(fuzzBaseIndex + i), Type: raft.LogCommand, Data: fr}
		}
		for i, out := range d.ApplyBatch(logs) {
			if r := resultString(out.(*Result)); r != results[i] {
				t.Fatalf("entry %d: batched result differs:\n%s\n%s", i, r, results[i])
			}
		}
		if dumpState(d) != dumpState(b) {
			t.Fatal("the batched state differs")
		}
		fuzzReads(t, a, a.LastNow())
		fuzzReads(t, b, b.LastNow())
	})
}

// TestFuzzFrames checks the framing FuzzApply uses to turn one input into
// a sequence of entries.
func TestFuzzFrames(t *testing.T) {
	x, y := mustEncode(t, cNS("x")), mustEncode(t, cNS("y"))
	fr := splitFrames(frame(x, y))
	if len(fr) != 2 || string(fr[0]) != string(x) || string(fr[1]) != string(y) {
		t.Fatalf("frames %q", fr)
	}
	if fr := splitFrames([]byte{0xff}); len(fr) != 1 {
		t.Fatalf("bad prefix: %q", fr)
	}
	if fr := splitFrames([]byte{5, 1}); len(fr) != 1 || len(fr[0]) != 2 {
		t.Fatalf("short frame: %q", fr)
	}
}
