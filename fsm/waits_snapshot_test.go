package fsm

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	fsmpb "github.com/grackle-coord/grackle/proto/grackle/fsm/v1"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// Snapshot format 4 (waits_snapshot.go): wait groups, jobs, barriers and
// arrivals round-trip; every record is checked on restore; older formats
// still restore.

// waitsState is a state with wait groups of all three statuses (and one
// ACTIVE record past its expires_at that ExpireTimers has not reached),
// their jobs, barriers with arrivals at their current and previous
// generations, and timers of every kind. The harness checks the
// invariants after every step.
func waitsState(t testing.TB) *harness {
	h := newHarness(t)
	h.record = true
	h.ok(cNSFull("ns", "waits", md("team", "w")))
	h.ok(cNS("other"))
	h.ok(cWGFull("ns", "active", "d", 5, h.now+3600*sec, 60, md("k", "v")))
	h.ok(cJobs("ns", "active", job("a", "m", "1"), job("b")))
	h.ok(cWGFull("ns", "done", "", 2, 0, 120, nil))
	h.ok(cDone("ns", "done", "x", "y"))
	h.ok(cWGFull("ns", "expired", "", 3, h.now+sec, 30, nil))
	h.ok(cDone("ns", "expired", "x"))
	h.ok(cWGFull("ns", "late", "", 3, h.now+2*sec, 0, nil))
	h.advance(1500 * int64(time.Millisecond))
	h.ok(cTimers(0)) // "expired" expires; "late" does not yet
	h.ok(cWG("other", "g", 1))
	h.ok(cBarFull("ns", "bar", "d", 3, 600, md("x", "y")))
	for _, p := range []string{"p1", "p2", "p3"} {
		h.ok(cArriveMD("ns", "bar", p, 1, md("p", p)))
	}
	h.advance(sec) // "late" is past its expires_at now
	h.ok(cArrive("ns", "bar", "p2", 2))
	h.ok(cArrive("ns", "bar", "p1", 2))
	h.ok(cBar("ns", "fresh", 2))
	h.ok(cBarFull("other", "solo", "", 1, 5, nil))
	h.ok(cArrive("other", "solo", "p", 1))
	h.ok(cArrive("other", "solo", "p", 2))
	if w := h.wg("ns", "late"); w.Status != wgExpired {
		t.Fatalf("late reads %v", w.Status)
	}
	return h
}

// waitReads renders everything a client can read of the waits, at now.
func waitReads(t testing.TB, f *FSM, now int64) string {
	t.Helper()
	var b strings.Builder
	for _, ns := range []string{"ns", "other"} {
		wgs, err := f.ListWaitGroups(ns, 250, "", now)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range wgs.Items {
			b.WriteString("wg " + protoString(w) + "\n")
			js, err := f.ListWaitGroupCompletedJobs(ns, w.Name, 250, "", now)
			if err != nil {
				t.Fatal(err)
			}
			for _, j := range js.Items {
				b.WriteString("  job " + protoString(j) + "\n")
			}
		}
		bars, err := f.ListBarriers(ns, 250, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range bars.Items {
			b.WriteString("bar " + protoString(x) + "\n")
			for gen := x.Generation; gen >= 1 && gen >= x.Generation-1; gen-- {
				ps, g, err := f.ListBarrierParticipants(ns, x.Name, gen, 250, "")
				if err != nil || g != gen {
					t.Fatalf("participants of %s/%s gen %d: %v %d", ns, x.Name, gen, err, g)
				}
				for _, p := range ps.Items {
					b.WriteString("  arrival " + protoString(p) + "\n")
				}
			}
		}
	}
	if at, ok := f.NextTimer(); ok {
		b.WriteString("next timer " + time.Unix(0, at).UTC().String() + "\n")
	}
	return b.String()
}

func TestWaitsSnapshotRoundTrip(t *testing.T) {
	h := waitsState(t)
	snap := snapshotBytes(t, h.f)
	g := New(Options{TempDir: t.TempDir()})
	g.ApplyCommand(1, cNS("replaced")) // a state of its own, to be replaced
	if err := restoreBytes(g, snap); err != nil {
		t.Fatal(err)
	}
	if err := g.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	if dumpState(g) != dumpState(h.f) || g.AppliedIndex() != h.f.AppliedIndex() || g.LastNow() != h.f.LastNow() {
		t.Fatalf("restored state differs:\n%s\n%s", dumpState(h.f), dumpState(g))
	}
	if !bytes.Equal(snapshotBytes(t, g), snap) {
		t.Fatal("the restored state writes different bytes")
	}
	for _, at := range []int64{h.now, h.now + 3600*sec} {
		if a, b := waitReads(t, h.f, at), waitReads(t, g, at); a != b {
			t.Fatalf("reads differ after the restore:\n%s\n%s", a, b)
		}
	}
	if !strings.Contains(waitReads(t, g, h.now), "arrival") || strings.Count(dumpState(g), "\nwg ") != 5 {
		t.Fatalf("test is vacuous:\n%s", dumpState(g))
	}
	// Both go on alike: the derived indexes (arrivals by process, timers,
	// counts) were rebuilt.
	h2 := &harness{t: t, f: g, now: h.now, idx: h.idx, check: true}
	steps := []func(h *harness) *Result{
		func(h *harness) *Result { return h.ok(cArrive("ns", "bar", "p3", 1)) },    // retry at the previous generation
		func(h *harness) *Result { return h.ok(cArrive("ns", "bar", "p1", 2)) },    // retry at the current one
		func(h *harness) *Result { return h.ok(cArrive("ns", "bar", "p3", 2)) },    // trips
		func(h *harness) *Result { return h.ok(cArrive("other", "solo", "p", 2)) }, // previous generation
		func(h *harness) *Result { return h.ok(cDone("ns", "active", "a", "c")) },
		func(h *harness) *Result { return h.ok(cDone("ns", "done", "x")) },
		func(h *harness) *Result { return h.apply(cDone("ns", "late", "z")) }, // expired
		func(h *harness) *Result { return h.apply(cWG("ns", "active", 1)) },
		func(h *harness) *Result { return h.ok(cTimers(0)) },
		func(h *harness) *Result { h.advance(200 * sec); return h.ok(cTimers(0)) },
		func(h *harness) *Result { h.advance(4000 * sec); return h.ok(cTimers(0)) },
		func(h *harness) *Result { return h.ok(cTimers(0)) },
		func(h *harness) *Result { return h.ok(cNSDelete("other")) },
	}
	for i, step := range steps {
		ra, rb := step(h), step(h2)
		if resultString(ra) != resultString(rb) {
			t.Fatalf("step %d differs after a restore:\n%s\n%s", i, resultString(ra), resultString(rb))
		}
	}
	if !bytes.Equal(snapshotBytes(t, h.f), snapshotBytes(t, g)) {
		t.Fatal("snapshots differ after going on")
	}
	// Left: "late" (expired, kept); "active" expired and was deleted 60 s
	// later, "done" and "expired" were deleted after their keep.
	if p, _ := g.ListWaitGroups("ns", 0, "", h2.now); len(p.Items) != 1 || p.Items[0].Name != "late" {
		t.Fatalf("after the timers: %v", p.Items)
	}
}

// Snapshot is point in time for the wait tables too.
func TestWaitsSnapshotIsPointInTime(t *testing.T) {
	h := waitsState(t)
	want := snapshotBytes(t, h.f)
	snap, err := h.f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	h.ok(cDone("ns", "active", "c", "d"))
	h.ok(cArrive("ns", "bar", "p3", 2))
	h.ok(cWGDelete("ns", "done"))
	h.ok(cBar("ns", "new", 2))
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	if !bytes.Equal(sink.Bytes(), want) {
		t.Fatal("Persist wrote wait records applied after Snapshot")
	}
}

// ---- damaged snapshots ----

// editRecords rewrites one table of a snapshot: edit gets every record of
// it (copies) and returns the records to store, in one chunk.
func editRecords(t *testing.T, good []byte, bucket []byte, edit func(recs [][]byte) [][]byte) []byte {
	t.Helper()
	return editSnapshot(t, good, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucket)
		var keys, recs [][]byte
		c := b.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			keys = append(keys, append([]byte(nil), k...))
			if err := splitChunk(v, func(rec []byte) error {
				recs = append(recs, append([]byte(nil), rec...))
				return nil
			}); err != nil {
				return err
			}
		}
		for _, k := range keys {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		recs = edit(recs)
		if len(recs) == 0 {
			return nil
		}
		var k [8]byte
		binary.BigEndian.PutUint64(k[:], 0)
		return b.Put(k[:], joinRecords(recs))
	})
}

func decWGRec(t *testing.T, rec []byte) wgRec {
	d := dec{b: rec}
	w := wgRec{ns: d.str(), name: d.str(), desc: d.str(), md: d.md()}
	var status int64
	w.counter, w.completed, status, w.expiresAt, w.deleteAfter, w.finishedAt = d.varint(), d.varint(), d.varint(), d.varint(), d.varint(), d.varint()
	w.version, w.createdAt, w.updatedAt, w.lastActivity = d.varint(), d.varint(), d.varint(), d.varint()
	w.status = pb.WaitGroupStatus(status)
	if err := d.end(); err != nil {
		t.Fatal(err)
	}
	return w
}

func decJobRec(t *testing.T, rec []byte) jobRec {
	d := dec{b: rec}
	j := jobRec{ns: d.str(), wg: d.str(), id: d.str(), completedAt: d.varint(), md: d.md()}
	if err := d.end(); err != nil {
		t.Fatal(err)
	}
	return j
}

func decBarRec(t *testing.T, rec []byte) barRec {
	d := dec{b: rec}
	b := barRec{ns: d.str(), name: d.str(), desc: d.str(), md: d.md()}
	b.expected, b.arrived, b.generation, b.deleteInactive = d.varint(), d.varint(), d.varint(), d.varint()
	b.version, b.createdAt, b.updatedAt, b.lastActivity = d.varint(), d.varint(), d.varint(), d.varint()
	if err := d.end(); err != nil {
		t.Fatal(err)
	}
	return b
}

func decArrivalRec(t *testing.T, rec []byte) arrivalRec {
	d := dec{b: rec}
	r := arrivalRec{ns: d.str(), bar: d.str(), gen: d.varint(), seq: d.varint(), proc: d.str(), arrivedAt: d.varint(), md: d.md()}
	if err := d.end(); err != nil {
		t.Fatal(err)
	}
	return r
}

// insertArrival adds r to rs in table order.
func insertArrival(rs []arrivalRec, r arrivalRec) []arrivalRec {
	rs = append(rs, r)
	sort.Slice(rs, func(i, j int) bool { return lessArrival(rs[i], rs[j]) })
	return rs
}

// Damaged wait records are refused with an error naming the record, and
// the FSM keeps its state.
func TestWaitsRestoreRefusesDamage(t *testing.T) {
	good := snapshotBytes(t, waitsState(t).f)
	editWG := func(name string, edit func(w *wgRec)) []byte {
		return editRecords(t, good, bucketWaitGroups, func(recs [][]byte) [][]byte {
			found := false
			for i, r := range recs {
				if w := decWGRec(t, r); w.name == name {
					edit(&w)
					recs[i], found = appendWG(nil, w), true
				}
			}
			if !found {
				t.Fatalf("no wait group %q", name)
			}
			return recs
		})
	}
	dropWG := func(name string) []byte {
		return editRecords(t, good, bucketWaitGroups, func(recs [][]byte) [][]byte {
			var out [][]byte
			for _, r := range recs {
				if decWGRec(t, r).name != name {
					out = append(out, r)
				}
			}
			return out
		})
	}
	editJobs := func(edit func(js []jobRec) []jobRec) []byte {
		return editRecords(t, good, bucketJobs, func(recs [][]byte) [][]byte {
			var js []jobRec
			for _, r := range recs {
				js = append(js, decJobRec(t, r))
			}
			var out [][]byte
			for _, j := range edit(js) {
				out = append(out, appendJob(nil, j))
			}
			return out
		})
	}
	editBar := func(name string, edit func(b *barRec)) []byte {
		return editRecords(t, good, bucketBarriers, func(recs [][]byte) [][]byte {
			for i, r := range recs {
				if b := decBarRec(t, r); b.name == name {
					edit(&b)
					recs[i] = appendBar(nil, b)
				}
			}
			return recs
		})
	}
	editArrivals := func(edit func(rs []arrivalRec) []arrivalRec) []byte {
		return editRecords(t, good, bucketArrivals, func(recs [][]byte) [][]byte {
			var rs []arrivalRec
			for _, r := range recs {
				rs = append(rs, decArrivalRec(t, r))
			}
			var out [][]byte
			for _, r := range edit(rs) {
				out = append(out, appendArrival(nil, r))
			}
			return out
		})
	}
	// arrivalsOf finds the arrivals of ns/bar at gen in rs (indexes).
	arrivalsOf := func(rs []arrivalRec, bar string, gen int64) []int {
		var out []int
		for i, r := range rs {
			if r.ns == "ns" && r.bar == bar && r.gen == gen {
				out = append(out, i)
			}
		}
		if len(out) < 2 {
			t.Fatalf("fewer than two arrivals at %s generation %d", bar, gen)
		}
		return out
	}
	cases := []struct {
		name, want string
		snap       []byte
	}{
		{"job of a missing group", `missing wait group "ns"/"active"`, dropWG("active")},
		{"a job record missing", `wait group "ns"/"active": 1 job records for 2 completed`, editJobs(func(js []jobRec) []jobRec {
			return append(js[:1:1], js[2:]...) // active's b
		})},
		{"completed_jobs above the job records", `wait group "ns"/"active": 2 job records for 3 completed`, editWG("active", func(w *wgRec) { w.completed = 3 })},
		{"completed_jobs above counter", `"ns"/"active": 2 jobs completed of counter 1`, editWG("active", func(w *wgRec) { w.counter = 1 })},
		{"status 0", `wait group "ns"/"active": bad status 0`, editWG("active", func(w *wgRec) { w.status = 0 })},
		{"status 4", `wait group "ns"/"active": bad status 4`, editWG("active", func(w *wgRec) { w.status = 4 })},
		{"COMPLETED short of counter", `"ns"/"done": status WAIT_GROUP_STATUS_COMPLETED with 2 of 3`, editWG("done", func(w *wgRec) { w.counter = 3 })},
		{"EXPIRED with every job done", `"ns"/"expired": status WAIT_GROUP_STATUS_EXPIRED with 1 of 1`, editWG("expired", func(w *wgRec) { w.counter = 1; w.completed = 1 })},
		{"ACTIVE with finished_at", `"ns"/"active": status WAIT_GROUP_STATUS_ACTIVE with finished_at`, editWG("active", func(w *wgRec) { w.finishedAt = 5 })},
		{"EXPIRED without finished_at", `"ns"/"expired": status WAIT_GROUP_STATUS_EXPIRED with finished_at 0`, editWG("expired", func(w *wgRec) { w.finishedAt = 0 })},
		{"EXPIRED at another time than expires_at", `"ns"/"expired": expired at`, editWG("expired", func(w *wgRec) { w.finishedAt++ })},
		{"EXPIRED without expires_at", `"ns"/"expired": expired at`, editWG("expired", func(w *wgRec) { w.expiresAt = 0 })},
		{"keep past 30 days", `"ns"/"done": expires_at, delete_after_finished_seconds`, editWG("done", func(w *wgRec) { w.deleteAfter = MaxKeepSeconds + 1 })},
		{"version 0", `"ns"/"active": expires_at, delete_after_finished_seconds or version`, editWG("active", func(w *wgRec) { w.version = 0 })},
		{"wait group in a missing namespace", `wait group "active" in missing namespace "nz"`, editWG("active", func(w *wgRec) { w.ns = "nz" })},
		{"bad wait group name", `wait group in namespace "ns"`, editWG("active", func(w *wgRec) { w.name = "act ive" })},
		{"bad job id", `job of wait group "ns"/"active": InvalidArgument: job_id`, editJobs(func(js []jobRec) []jobRec { js[0].id = "a a"; return js })},
		{"jobs out of order", `out of order`, editJobs(func(js []jobRec) []jobRec { js[0], js[1] = js[1], js[0]; return js })},
		{"a job twice", `out of order`, editJobs(func(js []jobRec) []jobRec { js[1].id = js[0].id; return js })},
		{"barrier with all arrived", `barrier "ns"/"bar": 2 arrived of 2 expected`, editBar("bar", func(b *barRec) { b.expected = 2 })},
		{"barrier arrived above expected", `barrier "ns"/"bar": 2 arrived of 1 expected`, editBar("bar", func(b *barRec) { b.expected = 1 })},
		{"barrier at generation 0", `barrier "ns"/"fresh": generation`, editBar("fresh", func(b *barRec) { b.generation = 0 })},
		{"barrier keep past 30 days", `barrier "ns"/"fresh": generation, delete_inactive_after_seconds`, editBar("fresh", func(b *barRec) { b.deleteInactive = MaxKeepSeconds + 1 })},
		{"arrival count above the records", `barrier "ns"/"bar": 3 arrived but 2 arrival records`, editBar("bar", func(b *barRec) { b.arrived, b.expected = 3, 4 })},
		{"arrivals of an older generation", `barrier "ns"/"bar" at generation 3: arrival at generation 1`, editBar("bar", func(b *barRec) { b.generation = 3 })},
		{"arrival of a future generation", `barrier "ns"/"fresh" at generation 1: arrival at generation 2`, editArrivals(func(rs []arrivalRec) []arrivalRec {
			return insertArrival(rs, arrivalRec{ns: "ns", bar: "fresh", gen: 2, seq: 1, proc: "p", arrivedAt: epoch})
		})},
		{"arrival at generation 0", `barrier "ns"/"fresh" at generation 1: arrival at generation 0`, editArrivals(func(rs []arrivalRec) []arrivalRec {
			return insertArrival(rs, arrivalRec{ns: "ns", bar: "fresh", gen: 0, seq: 1, proc: "p", arrivedAt: epoch})
		})},
		{"a process twice in one generation", `barrier "ns"/"bar" generation 2: process "p2" arrived twice`, editArrivals(func(rs []arrivalRec) []arrivalRec {
			i := arrivalsOf(rs, "bar", 2)
			rs[i[1]].proc = rs[i[0]].proc
			return rs
		})},
		{"a process twice in the previous generation", `barrier "ns"/"bar" generation 1: process "p1" arrived twice`, editArrivals(func(rs []arrivalRec) []arrivalRec {
			i := arrivalsOf(rs, "bar", 1)
			rs[i[2]].proc = rs[i[0]].proc
			return rs
		})},
		{"an arrival number skipped", `barrier "ns"/"bar" generation 2: arrival 3 where 2 was due`, editArrivals(func(rs []arrivalRec) []arrivalRec {
			rs[arrivalsOf(rs, "bar", 2)[1]].seq = 3
			return rs
		})},
		{"an arrival record missing", `barrier "ns"/"bar": 2 arrived but 1 arrival records at generation 2`, editArrivals(func(rs []arrivalRec) []arrivalRec {
			i := arrivalsOf(rs, "bar", 2)[1]
			return append(rs[:i:i], rs[i+1:]...)
		})},
		{"arrival at a missing barrier", `arrival of "p" at missing barrier "other"/"zz"`, editArrivals(func(rs []arrivalRec) []arrivalRec {
			rs[len(rs)-1].bar = "zz"
			return rs
		})},
		{"bad process id", `arrival at barrier "ns"/"bar": InvalidArgument: process_id`, editArrivals(func(rs []arrivalRec) []arrivalRec {
			rs[0].proc = "p\x00"
			return rs
		})},
		{"arrivals out of order", `of barrier "ns"/"bar" out of order`, editArrivals(func(rs []arrivalRec) []arrivalRec {
			rs[0], rs[len(rs)-1] = rs[len(rs)-1], rs[0] // other/solo's first
			return rs
		})},
		{"arrival numbers swapped", `barrier "ns"/"bar" generation 1: arrival 2 where 1 was due`, editArrivals(func(rs []arrivalRec) []arrivalRec {
			rs[0], rs[1] = rs[1], rs[0]
			return rs
		})},
		{"arrivals table missing", `bucket "arrivals" missing`, editSnapshot(t, good, func(tx *bolt.Tx) error { return tx.DeleteBucket(bucketArrivals) })},
		{"jobs table missing", `bucket "jobs" missing`, editSnapshot(t, good, func(tx *bolt.Tx) error { return tx.DeleteBucket(bucketJobs) })},
		{"wait group record not decodable", `wait group record`, editRecords(t, good, bucketWaitGroups, func(recs [][]byte) [][]byte {
			recs[0] = recs[0][:len(recs[0])-1]
			return recs
		})},
	}
	// The victim has waits of its own that must survive every failure.
	victim := waitsState(t).f
	h := &harness{t: t, f: victim, now: victim.LastNow(), idx: victim.AppliedIndex(), check: true}
	h.ok(cWG("other", "victim", 7))
	before, beforeReads := dumpState(victim), waitReads(t, victim, h.now)
	for _, c := range cases {
		err := restoreBytes(victim, c.snap)
		if err == nil {
			t.Fatalf("%s: restore succeeded", c.name)
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Fatalf("%s: error %q does not say %q", c.name, err, c.want)
		}
		if dumpState(victim) != before || waitReads(t, victim, h.now) != beforeReads {
			t.Fatalf("%s: a failed restore changed the state", c.name)
		}
	}
	if err := restoreBytes(victim, good); err != nil {
		t.Fatalf("the good snapshot: %v", err)
	}
}

// A snapshot of the build before wait groups (format 3, with locks)
// restores: no wait groups or barriers, their limits at the defaults.
//
// testdata/snapshot-format3.db was written by commit 45cd381 (the last
// format-3 build): in a worktree of that commit (git worktree add
// /tmp/f3 45cd381, removed afterwards) this test was added to package fsm
// and run with FIXTURE_OUT=<path>/snapshot-format3.db go test ./fsm/ -run
// TestWriteFormat3Fixture:
//
//	func TestWriteFormat3Fixture(t *testing.T) {
//		h := lockSetup(t) // namespace "ns", lock leases llA, llB, llC (metadata host)
//		h.ok(cLock("ns", "a", llA, false))
//		h.ok(cLock("ns", "a", llB, false))
//		h.ok(cLock("ns", "b/c/d", llC, true))
//		h.ok(cNSFull("ns1", "semaphores", md("team", "x")))
//		h.ok(cSem("ns1", "s1", 10))
//		h.ok(cLease("ns1", lid(1), "p1", 60))
//		h.ok(cLease("ns1", lid(2), "p2", 60))
//		h.ok(cAcq("ns1", "s1", lid(1), 2))
//		h.ok(cAcq("ns1", "s1", lid(2), 3))
//		if err := os.WriteFile(os.Getenv("FIXTURE_OUT"), snapshotBytes(t, h.f), 0o644); err != nil {
//			t.Fatal(err)
//		}
//	}
func TestRestoreFormat3Snapshot(t *testing.T) {
	b, err := os.ReadFile("testdata/snapshot-format3.db")
	if err != nil {
		t.Fatal(err)
	}
	if f := snapshotFormatOf(t, b); f != 3 {
		t.Fatalf("the fixture is format %d", f)
	}
	g := New(Options{TempDir: t.TempDir()})
	if err := restoreBytes(g, b); err != nil {
		t.Fatalf("format 3: %v", err)
	}
	if err := g.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	now := g.LastNow()
	l, err := g.GetLock("ns", "a", now)
	if err != nil || l.State != pb.LockState_LOCK_STATE_SHARED_LOCKED || len(l.Holders) != 2 {
		t.Fatalf("format 3 lock: %v %v", l, err)
	}
	if l, err := g.GetLock("ns", "b/c/d", now); err != nil || l.State != pb.LockState_LOCK_STATE_EXCLUSIVE_LOCKED {
		t.Fatalf("format 3 exclusive lock: %v %v", l, err)
	}
	if ll, err := g.GetLockLease("ns", llA, now); err != nil || ll.Metadata["host"] != "aa" {
		t.Fatalf("format 3 lock lease: %v %v", ll, err)
	}
	if sem, err := g.GetSemaphore("ns1", "s1", now); err != nil || sem.ActiveHolds != 5 || sem.ActiveHoldersCount != 2 {
		t.Fatalf("format 3 semaphore: %v %v", sem, err)
	}
	for _, ns := range []string{"ns", "ns1"} {
		if p, err := g.ListWaitGroups(ns, 0, "", now); err != nil || len(p.Items) != 0 {
			t.Fatalf("wait groups of a format-3 snapshot: %v %v", p.Items, err)
		}
		if p, err := g.ListBarriers(ns, 0, ""); err != nil || len(p.Items) != 0 {
			t.Fatalf("barriers of a format-3 snapshot: %v %v", p.Items, err)
		}
	}
	d, lim := DefaultLimits(), g.Limits()
	if lim.MaxWaitGroupsPerNamespace != d.MaxWaitGroupsPerNamespace || lim.MaxBarriersPerNamespace != d.MaxBarriersPerNamespace ||
		lim.MaxWaitGroupCounter != d.MaxWaitGroupCounter || lim.MaxBarrierProcesses != d.MaxBarrierProcesses || lim.MaxJobsPerCall != d.MaxJobsPerCall {
		t.Fatalf("wait limits of a format-3 snapshot: %+v", lim)
	}
	expectNextTimer(t, g, 0)
	// It goes on with waits, and snapshots as format 4.
	h := &harness{t: t, f: g, now: now, idx: g.AppliedIndex(), check: true}
	h.ok(cWG("ns", "g", 2))
	h.ok(cDone("ns", "g", "a"))
	h.ok(cBar("ns1", "b", 2))
	h.ok(cArrive("ns1", "b", "p", 1))
	snap := snapshotBytes(t, g)
	if f := snapshotFormatOf(t, snap); f != snapshotFormat {
		t.Fatalf("written as format %d", f)
	}
	g2 := New(Options{TempDir: t.TempDir()})
	if err := restoreBytes(g2, snap); err != nil || dumpState(g2) != dumpState(g) {
		t.Fatalf("format 4 after format 3: %v", err)
	}
}

func snapshotFormatOf(t *testing.T, b []byte) int64 {
	t.Helper()
	p := filepath.Join(t.TempDir(), "s.db")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(p, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var meta fsmpb.SnapshotMeta
	if err := db.View(func(tx *bolt.Tx) error { return proto.Unmarshal(tx.Bucket(bucketMeta).Get(keyMeta), &meta) }); err != nil {
		t.Fatal(err)
	}
	return int64(meta.Format)
}

// The same commands give the same snapshot bytes on two FSMs, and the
// same tables when packed in Batch entries.
func TestWaitsSnapshotDeterminism(t *testing.T) {
	a := waitsState(t)
	c := New(Options{TempDir: t.TempDir()})
	for i, cmd := range a.log {
		if r := c.ApplyCommand(uint64(i+1), proto.Clone(cmd).(*fsmpb.Command)); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	if !bytes.Equal(snapshotBytes(t, a.f), snapshotBytes(t, c)) {
		t.Fatal("two FSMs fed the same commands write different snapshots")
	}
	if !bytes.Equal(snapshotBytes(t, a.f), snapshotBytes(t, a.f)) {
		t.Fatal("one state written twice gives different bytes")
	}
	// Packed five to an entry: the same tables (the raft index differs).
	b := New(Options{TempDir: t.TempDir()})
	for i := 0; i < len(a.log); i += 5 {
		group := a.log[i:min(i+5, len(a.log))]
		var packed [][]byte
		for _, cmd := range group {
			packed = append(packed, mustEncode(t, cmd))
		}
		r := b.ApplyCommand(uint64(i+1), &fsmpb.Command{Now: group[0].Now, Op: &fsmpb.Command_Batch{Batch: &fsmpb.Batch{Commands: packed}}})
		for j, sub := range r.Batch {
			if sub.Err != nil {
				t.Fatalf("batched command %d: %v", i+j, sub.Err)
			}
		}
	}
	if err := b.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	if dumpState(a.f) != dumpState(b) {
		t.Fatalf("batched state differs:\n%s\n%s", dumpState(a.f), dumpState(b))
	}
}

// The invariant check refuses wait tables and indexes that disagree.
func TestCheckRefusesBrokenWaits(t *testing.T) {
	base := waitsState(t).f.st
	if err := base.check(); err != nil {
		t.Fatalf("intact state: %v", err)
	}
	wg := func(s *state, name string) wgRec {
		w, ok := s.getWG("ns", name)
		if !ok {
			t.Fatalf("no wait group %s", name)
		}
		return w
	}
	bar := func(s *state, name string) barRec {
		b, ok := s.getBar("ns", name)
		if !ok {
			t.Fatalf("no barrier %s", name)
		}
		return b
	}
	cases := map[string]struct {
		want    string
		breakIt func(s *state)
	}{
		"a timer missing": {"timers", func(s *state) {
			tk, _ := wg(s, "active").timer()
			s.timers.Delete(tk)
		}},
		"a timer at another time": {"timer", func(s *state) {
			tk, _ := wg(s, "active").timer()
			s.timers.Delete(tk)
			tk.at++
			s.timers.Set(tk)
		}},
		"a timer of nothing": {"timers", func(s *state) {
			s.timers.Set(timerKey{at: 1, kind: timerBarDelete, ns: "ns", name: "gone"})
		}},
		"a count off": {"wait counts", func(s *state) { s.waitCount["ns"] = waitCounts{1, 1} }},
		"a job of a missing group": {"job records", func(s *state) {
			s.jobs.Set(jobRec{ns: "ns", wg: "gone", id: "j"})
		}},
		"a job missing": {`wait group ns/active: 1 jobs stored for 2 completed`, func(s *state) {
			s.jobs.Delete(jobRec{ns: "ns", wg: "active", id: "a"})
		}},
		"COMPLETED short of counter": {"ns/done", func(s *state) {
			w := wg(s, "done")
			w.counter = 5
			s.waitGroups.Set(w)
		}},
		"ACTIVE with finished_at": {"ns/active", func(s *state) {
			w := wg(s, "active")
			w.finishedAt = 1
			s.waitGroups.Set(w)
		}},
		"EXPIRED at another time than expires_at": {"ns/expired: expired at", func(s *state) {
			w := wg(s, "expired")
			w.finishedAt++
			s.putWG(w)
		}},
		"all arrived, not tripped": {"ns/bar", func(s *state) {
			b := bar(s, "bar")
			b.expected = b.arrived
			s.barriers.Set(b)
		}},
		"an arrival not indexed": {"arrival", func(s *state) {
			delete(s.arrived, arrivalKey{ns: "ns", bar: "bar", proc: "p1", gen: 2})
		}},
		"an arrival at generation 0": {"generation 0", func(s *state) {
			r := arrivalRec{ns: "ns", bar: "fresh", gen: 0, seq: 1, proc: "p"}
			s.arrivals.Set(r)
			s.arrived[arrivalKey{ns: r.ns, bar: r.bar, proc: r.proc, gen: r.gen}] = struct{}{}
		}},
		"an arrival two generations back": {"generation 1", func(s *state) {
			b := bar(s, "bar")
			b.generation, b.arrived = 3, 0
			s.barriers.Set(b)
		}},
		"the same process twice in a generation": {"arrived twice", func(s *state) {
			s.arrivals.Set(arrivalRec{ns: "ns", bar: "bar", gen: 2, seq: 3, proc: "p1"})
			b := bar(s, "bar")
			b.arrived, b.expected = 3, 4
			s.barriers.Set(b)
		}},
	}
	for name, c := range cases {
		s := base.clone()
		if err := s.check(); err != nil {
			t.Fatalf("%s: the clone is already inconsistent: %v", name, err)
		}
		c.breakIt(s)
		if err := s.check(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: check gave %v, want an error with %q", name, err, c.want)
		}
	}
}
