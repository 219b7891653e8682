package fsm

import (
	"bytes"
	"math/rand"
	"testing"

	"github.com/hashicorp/raft"

	fsmpb "github.com/grackle-coord/grackle/proto/grackle/fsm/v1"
)

func batchOf(t testing.TB, data ...[]byte) []byte {
	return mustEncode(t, &fsmpb.Command{Op: &fsmpb.Command_Batch{Batch: &fsmpb.Batch{Commands: data}}})
}

// A Batch entry is exactly its commands applied one by one at its index:
// same results (fencing tokens included) and byte-identical snapshots. And
// a log of batches is deterministic: applied one entry at a time or in raft
// batches of random sizes, the results and snapshots are identical.
func TestBatchIsItsCommandsAtItsIndex(t *testing.T) {
	seed := seedFromEnv(t)
	n := 3000
	if testing.Short() {
		n = 800
	}
	t.Logf("GRACKLE_FSM_SEED=%d", seed)
	r := rand.New(rand.NewSource(seed))
	data := encodeLog(t, genLog(seed, n))
	// Pack the log into entries: a plain command, or a batch of 1 to 32.
	type entry struct {
		data []byte
		cmds [][]byte
	}
	var entries []entry
	for i := 0; i < n; {
		k := 1 + r.Intn(32)
		if i+k > n {
			k = n - i
		}
		if k == 1 && r.Intn(2) == 0 {
			entries = append(entries, entry{data: data[i], cmds: data[i : i+1]})
		} else {
			entries = append(entries, entry{data: batchOf(t, data[i:i+k]...), cmds: data[i : i+k]})
		}
		i += k
	}
	one := New(Options{TempDir: t.TempDir()})    // each command alone, at its entry's index
	serial := New(Options{TempDir: t.TempDir()}) // the packed log, one entry at a time
	// The packed log in raft batches; its Applied hook must see every
	// command on its own, in log order, with the result ApplyBatch returned.
	type seen struct {
		index uint64
		cmd   *fsmpb.Command
		res   *Result
	}
	var applied []seen
	batched := New(Options{TempDir: t.TempDir(), Applied: func(index uint64, cmd *fsmpb.Command, res *Result) {
		applied = append(applied, seen{index, cmd, res})
	}})
	for i := 0; i < len(entries); {
		k := 1 + r.Intn(16)
		if i+k > len(entries) {
			k = len(entries) - i
		}
		logs := make([]*raft.Log, k)
		for j := range logs {
			logs[j] = &raft.Log{Index: uint64(i + j + 1), Type: raft.LogCommand, Data: entries[i+j].data}
		}
		applied = applied[:0]
		outs := batched.ApplyBatch(logs)
		for j := 0; j < k; j++ {
			idx := uint64(i + j + 1)
			e := entries[i+j]
			rs := serial.ApplyBytes(idx, e.data)
			rb := outs[j].(*Result)
			subs, subsSerial := []*Result{rb}, []*Result{rs}
			if len(rb.Batch) > 0 || len(e.cmds) > 1 || !bytes.Equal(e.data, e.cmds[0]) {
				subs, subsSerial = rb.Batch, rs.Batch
			}
			if len(subs) != len(e.cmds) || len(subsSerial) != len(e.cmds) {
				t.Fatalf("seed %d, entry %d: %d and %d results for %d commands", seed, idx, len(subs), len(subsSerial), len(e.cmds))
			}
			for c, cmd := range e.cmds {
				if len(applied) == 0 {
					t.Fatalf("seed %d, entry %d, command %d: the Applied hook did not see it", seed, idx, c)
				}
				a := applied[0]
				applied = applied[1:]
				if a.index != idx || a.res != subs[c] || !bytes.Equal(mustEncode(t, a.cmd), cmd) {
					t.Fatalf("seed %d, entry %d, command %d: the Applied hook saw index %d, another command or result", seed, idx, c, a.index)
				}
				ro := one.ApplyBytes(idx, cmd)
				if a, b, s := resultString(ro), resultString(subs[c]), resultString(subsSerial[c]); a != b || a != s {
					t.Fatalf("seed %d, entry %d, command %d: results differ:\nalone:   %s\nbatched: %s\nserial:  %s", seed, idx, c, a, b, s)
				}
			}
		}
		if len(applied) != 0 {
			t.Fatalf("seed %d: the Applied hook saw %d commands more than the entries hold", seed, len(applied))
		}
		i += k
		if r.Intn(8) == 0 || i == len(entries) {
			so, ss, sb := snapshotBytes(t, one), snapshotBytes(t, serial), snapshotBytes(t, batched)
			if !bytes.Equal(so, sb) || !bytes.Equal(ss, sb) {
				t.Fatalf("seed %d: snapshots differ after entry %d", seed, i)
			}
		}
	}
	if err := batched.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// A batch that holds a command this server cannot apply is rejected whole:
// CodeInternal, nothing applied (not even the commands before the bad one),
// and on the Raft path the entry is counted as rejected.
func TestBatchRejectedWhole(t *testing.T) {
	good := mustEncode(t, cNS("a"))
	unknown := mustEncode(t, &fsmpb.Command{}) // no op, not skippable, no grants
	nested := batchOf(t, good)
	for name, entry := range map[string][]byte{
		"undecodable":  batchOf(t, good, []byte{0xff, 0xff, 0xff}),
		"nested batch": batchOf(t, good, nested),
		"unknown op":   batchOf(t, good, unknown),
		"grants of its own": mustEncode(t, withGrants(&fsmpb.Command{Op: &fsmpb.Command_Batch{Batch: &fsmpb.Batch{Commands: [][]byte{good}}}},
			grant("a", "s", lid(1), 1))),
	} {
		t.Run(name, func(t *testing.T) {
			f := New(Options{TempDir: t.TempDir()})
			res := f.ApplyBytes(1, entry)
			expectErr(t, res.Err, CodeInternal)
			if len(res.Batch) != 0 {
				t.Fatalf("results of a rejected batch: %v", res.Batch)
			}
			if _, err := f.GetNamespace("a"); err == nil {
				t.Fatal("a command of a rejected batch applied")
			}
			if f.LastNow() != 0 {
				t.Fatalf("clock moved to %d", f.LastNow())
			}
			g := New(Options{TempDir: t.TempDir()})
			out := g.ApplyBatch([]*raft.Log{{Index: 1, Type: raft.LogCommand, Data: entry}})
			if r := out[0].(*Result); r.Err == nil || !r.Rejected || g.RejectedEntries() != 1 {
				t.Fatalf("the Raft path did not reject the batch: %s", resultString(r))
			}
			if _, err := g.GetNamespace("a"); err == nil {
				t.Fatal("a command of a rejected batch applied on the Raft path")
			}
		})
	}
}

// Grants at one index get consecutive fencing tokens, whether they come in
// one entry or in a batch, and a later entry's tokens stay above them.
func TestBatchFencingTokensIncrease(t *testing.T) {
	f := New(Options{TempDir: t.TempDir()})
	setup := []*fsmpb.Command{cNS("a"), cSem("a", "s", 10), cLease("a", lid(1), "p", 60), cLease("a", lid(2), "p", 60), cLease("a", lid(3), "p", 60)}
	for i, c := range setup {
		c.Now = epoch
		if r := f.ApplyCommand(uint64(i+1), c); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	var subs [][]byte
	for i := 1; i <= 3; i++ {
		c := cAcq("a", "s", lid(i), 1)
		c.Now = epoch
		subs = append(subs, mustEncode(t, c))
	}
	res := f.ApplyBytes(6, batchOf(t, subs...))
	if res.Err != nil || len(res.Batch) != 3 {
		t.Fatalf("%v %v", res.Err, res.Batch)
	}
	last := uint64(0)
	for i, r := range res.Batch {
		if r.Err != nil || !r.Acquired {
			t.Fatalf("acquire %d: %v", i, r.Err)
		}
		if r.Index != 6 || r.Holder.FencingToken <= last {
			t.Fatalf("acquire %d: index %d token %d after %d", i, r.Index, r.Holder.FencingToken, last)
		}
		last = r.Holder.FencingToken
	}
	c := cAcq("a", "s", lid(1), 2) // re-acquire: a new token
	c.Now = epoch
	if r := f.ApplyCommand(7, c); r.Err != nil || r.Holder.FencingToken <= last {
		t.Fatalf("next entry's token %d after %d (%v)", r.Holder.FencingToken, last, r.Err)
	}
}
