package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/encoding/protowire"

	fsmpb "github.com/grackle-coord/grackle/proto/grackle/fsm/v1"
)

// withUnknownOp appends an op field this server does not know (a oneof
// member a newer server might add) to an encoded command.
func withUnknownOp(b []byte) []byte {
	b = protowire.AppendTag(b, 27, protowire.BytesType)
	return protowire.AppendBytes(b, []byte{0x0a, 0x01, 'x'})
}

func applyFixture(t *testing.T) *harness {
	h := newHarness(t)
	h.ok(cNS("ns"))
	h.ok(cSem("ns", "s", 3))
	h.ok(cLease("ns", lid(1), "p", 60))
	h.ok(cLease("ns", lid(2), "p", 60))
	h.ok(cAcq("ns", "s", lid(1), 3))
	return h
}

// applyRaw applies bytes through ApplyBytes at the harness's next index
// and clock, and checks the invariants.
func (h *harness) applyRaw(data []byte) *Result {
	h.t.Helper()
	h.idx++
	r := h.f.ApplyBytes(h.idx, data)
	if err := h.f.CheckInvariants(); err != nil {
		h.t.Fatal(err)
	}
	return r
}

func TestApplyBytesMatchesApplyCommand(t *testing.T) {
	a, b := applyFixture(t), applyFixture(t)
	cmds := []*fsmpb.Command{
		cAcq("ns", "s", lid(2), 1),
		withGrants(cRel("ns", "s", lid(1)), grant("ns", "s", lid(2), 2)),
		cAcqFull("ns", "s", lid(1), 1, false, md("x", "y")),
		cSemUpdate("ns", "s", "d", 9, md("a", "b"), 1),
		cRefresh("ns", lid(1), 5),
		cExtend(sec),
		cExpire(0),
		cRevoke("ns", lid(2)),
		cNSDelete("ns"),
	}
	for i, c := range cmds {
		a.advance(sec)
		b.advance(sec)
		c.Now = b.now
		data := mustEncode(t, c)
		ra := a.apply(c)
		rb := b.applyRaw(data)
		if resultString(ra) != resultString(rb) {
			t.Fatalf("step %d (%s):\nApplyCommand %s\nApplyBytes   %s", i, opName(c), resultString(ra), resultString(rb))
		}
	}
	if dumpState(a.f) != dumpState(b.f) || a.f.LastNow() != b.f.LastNow() || a.f.AppliedIndex() != b.f.AppliedIndex() {
		t.Fatal("states differ")
	}
}

// Undecodable bytes and unknown ops: CodeInternal from ApplyBytes, and
// nothing changes (not even the clock).
func TestApplyBytesRejects(t *testing.T) {
	valid := mustEncode(t, withGrants(cAcq("ns", "s", lid(2), 1), grant("ns", "s", lid(2), 1)))
	// A string that is not valid UTF-8 is not among the cases: Decode does
	// not check strings (Encode refuses them, TestEncodeRefusesInvalidUTF8,
	// so no entry holds one).
	withNow := func(c *fsmpb.Command) *fsmpb.Command { c.Now = epoch + 1000*sec; return c }
	cases := map[string][]byte{
		"garbage":                    {0xff, 0xff, 0xff, 0xff},
		"truncated":                  valid[:len(valid)-3],
		"empty entry (no op at all)": nil,
		"no op, not skippable":       mustEncode(t, withNow(&fsmpb.Command{})),
		"unknown op":                 withUnknownOp(mustEncode(t, withNow(&fsmpb.Command{}))),
		"unknown op with grants":     withUnknownOp(mustEncode(t, withNow(cGrants(grant("ns", "s", lid(2), 1))))),
		"wrong wire type for an op":  protowire.AppendVarint(protowire.AppendTag(nil, 10, protowire.VarintType), 1),
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			h := applyFixture(t)
			h.ok(cRel("ns", "s", lid(1))) // so that a stray grant would apply
			before, now := dumpState(h.f), h.f.LastNow()
			r := h.applyRaw(data)
			if r.Err == nil || r.Err.Code != CodeInternal {
				t.Fatalf("got %v, want an Internal error", r.Err)
			}
			if r.Acquired || len(r.Grants) != 0 || len(r.Freed) != 0 {
				t.Fatalf("result reports effects: %s", resultString(r))
			}
			if dumpState(h.f) != before {
				t.Fatalf("state changed:\n%s\n%s", before, dumpState(h.f))
			}
			if h.f.LastNow() != now {
				t.Fatalf("LastNow moved from %d to %d", now, h.f.LastNow())
			}
			if h.f.AppliedIndex() != h.idx {
				t.Fatalf("AppliedIndex %d, want %d (the entry was consumed)", h.f.AppliedIndex(), h.idx)
			}
		})
	}
}

// A skippable command whose op this server does not know is a no-op; its
// grants still apply. A skippable command with no op at all too.
func TestSkippableUnknownOp(t *testing.T) {
	h := applyFixture(t)
	before := dumpState(h.f)
	for _, c := range []*fsmpb.Command{{Skippable: true}, {Skippable: true, Now: h.now}} {
		for _, data := range [][]byte{mustEncode(t, c), withUnknownOp(mustEncode(t, c))} {
			if r := h.applyRaw(data); r.Err != nil {
				t.Fatalf("skippable: %v", r.Err)
			}
			if dumpState(h.f) != before {
				t.Fatal("a skipped op changed the state")
			}
		}
	}
	h.ok(cRel("ns", "s", lid(1)))
	c := cGrants(grant("ns", "s", lid(2), 2))
	c.Skippable, c.Now = true, h.now
	r := h.applyRaw(withUnknownOp(mustEncode(t, c)))
	if r.Err != nil || len(r.Grants) != 1 || !r.Grants[0].Granted {
		t.Fatalf("grants of a skipped op: %s", resultString(r))
	}
	// Through the raft adapter too: no panic.
	h.idx++
	if res := h.f.Apply(&raft.Log{Index: h.idx, Type: raft.LogCommand, Data: withUnknownOp(mustEncode(t, &fsmpb.Command{Skippable: true}))}); res.(*Result).Err != nil {
		t.Fatal(res)
	}
}

// The raft adapter rejects an entry it cannot apply: an error result
// naming the entry (Rejected), nothing changed but the
// applied index, the rejection counted and logged at ERROR. Never a panic.
func TestRaftAdapterRejectsUnappliable(t *testing.T) {
	cases := map[string][]byte{
		"garbage":                {0xff, 0xff, 0xff},
		"truncated":              mustEncode(t, cNS("ns2"))[:5],
		"empty":                  nil,
		"unknown op":             withUnknownOp(mustEncode(t, &fsmpb.Command{})),
		"unknown op with grants": withUnknownOp(mustEncode(t, cGrants(grant("ns", "s", lid(2), 1)))),
	}
	for name, data := range cases {
		for _, batch := range []bool{false, true} {
			t.Run(fmt.Sprint(name, "/batch=", batch), func(t *testing.T) {
				h := applyFixture(t)
				h.ok(cRel("ns", "s", lid(1)))
				var logged bytes.Buffer
				h.f.log = hclog.New(&hclog.LoggerOptions{Output: &logged, Level: hclog.Error})
				before := dumpState(h.f)
				idx := h.idx + 1
				l := &raft.Log{Index: idx, Type: raft.LogCommand, Data: data}
				var out any
				if batch {
					// Between two good entries: they apply, it does not.
					good := func(i uint64, c *fsmpb.Command) *raft.Log {
						c.Now = h.now
						return &raft.Log{Index: i, Type: raft.LogCommand, Data: mustEncode(t, c)}
					}
					l.Index = idx + 1
					res := h.f.ApplyBatch([]*raft.Log{good(idx, cNS("before")), l, good(idx+2, cNS("after"))})
					out = res[1]
					h.idx = idx + 2
					for _, i := range []int{0, 2} {
						if r := res[i].(*Result); r.Err != nil {
							t.Fatalf("entry %d beside the rejected one: %v", i, r.Err)
						}
					}
					for _, ns := range []string{"before", "after"} {
						h.ok(&fsmpb.Command{Op: &fsmpb.Command_DeleteNamespace{DeleteNamespace: &fsmpb.DeleteNamespace{Name: ns}}})
					}
				} else {
					out = h.f.Apply(l)
					h.idx = idx
				}
				r, ok := out.(*Result)
				if !ok || r.Err == nil || r.Err.Code != CodeInternal || !r.Rejected {
					t.Fatalf("result %#v", out)
				}
				if !strings.Contains(r.Err.Msg, fmt.Sprint("raft entry ", l.Index)) {
					t.Fatalf("error %q does not name the entry", r.Err.Msg)
				}
				if h.f.RejectedEntries() != 1 {
					t.Fatalf("%d entries counted as rejected", h.f.RejectedEntries())
				}
				if !strings.Contains(logged.String(), "[ERROR]") || !strings.Contains(logged.String(), fmt.Sprint("index=", l.Index)) {
					t.Fatalf("log %q", logged.String())
				}
				if h.f.AppliedIndex() < l.Index {
					t.Fatalf("applied index %d, want at least %d", h.f.AppliedIndex(), l.Index)
				}
				if batch {
					// The deletes above moved the clock and versions on.
					return
				}
				if dumpState(h.f) != before {
					t.Fatal("state changed")
				}
				if err := h.f.CheckInvariants(); err != nil {
					t.Fatal(err)
				}
				// The node goes on applying.
				h.ok(cAcq("ns", "s", lid(2), 1))
			})
		}
	}
}

func TestRaftAdapter(t *testing.T) {
	h := applyFixture(t)
	enc := func(c *fsmpb.Command) []byte { c.Now = h.now; return mustEncode(t, c) }
	base := h.idx
	logs := []*raft.Log{
		{Index: base + 1, Type: raft.LogCommand, Data: enc(cAcq("ns", "s", lid(2), 1))},
		{Index: base + 2, Type: raft.LogNoop},
		{Index: base + 3, Type: raft.LogCommand, Data: enc(withGrants(cRel("ns", "s", lid(1)), grant("ns", "s", lid(2), 1)))},
		{Index: base + 4, Type: raft.LogConfiguration, Data: []byte{0xff}},
		{Index: base + 5, Type: raft.LogCommand, Data: enc(cNS("ns"))}, // an op error is a result, not a panic
		{Index: base + 6, Type: raft.LogBarrier},
	}
	out := h.f.ApplyBatch(logs)
	if len(out) != len(logs) {
		t.Fatalf("%d results for %d logs", len(out), len(logs))
	}
	for _, i := range []int{1, 3, 5} {
		if out[i] != nil {
			t.Fatalf("result for a non-command entry: %v", out[i])
		}
	}
	r0, r2, r4 := out[0].(*Result), out[2].(*Result), out[4].(*Result)
	if r0.Err != nil || r0.Acquired || r0.Index != base+1 {
		t.Fatalf("entry 1: %s", resultString(r0))
	}
	if r2.Err != nil || !r2.Grants[0].Granted || r2.Grants[0].Holder.FencingToken != base+3 {
		t.Fatalf("entry 3: %s", resultString(r2))
	}
	expectErr(t, r4.Err, CodeAlreadyExists)
	if h.f.AppliedIndex() != base+6 {
		t.Fatalf("AppliedIndex %d", h.f.AppliedIndex())
	}
	// Apply is a batch of one.
	r := h.f.Apply(&raft.Log{Index: base + 7, Type: raft.LogCommand, Data: enc(cRel("ns", "s", lid(2)))}).(*Result)
	if r.Err != nil || len(r.Freed) != 1 || r.Index != base+7 {
		t.Fatalf("Apply: %s", resultString(r))
	}
	if err := h.f.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

func TestMembers(t *testing.T) {
	h := newHarness(t)
	h.ok(&fsmpb.Command{Op: &fsmpb.Command_SetMember{SetMember: &fsmpb.SetMember{NodeId: "n2", RaftAddress: "r2", GrpcAddress: "g2"}}})
	h.ok(&fsmpb.Command{Op: &fsmpb.Command_SetMember{SetMember: &fsmpb.SetMember{NodeId: "n1", RaftAddress: "r1", GrpcAddress: "g1"}}})
	h.ok(&fsmpb.Command{Op: &fsmpb.Command_SetMember{SetMember: &fsmpb.SetMember{NodeId: "n2", RaftAddress: "r2b", GrpcAddress: "g2b"}}})
	h.ok(&fsmpb.Command{Op: &fsmpb.Command_SetMember{SetMember: &fsmpb.SetMember{NodeId: "n3", RaftAddress: "r3", GrpcAddress: "g3", Voter: true}}})
	h.fails(&fsmpb.Command{Op: &fsmpb.Command_SetMember{SetMember: &fsmpb.SetMember{}}}, CodeInvalidArgument, "node_id")
	if got := fmt.Sprint(h.f.Members()); got != "[{n1 r1 g1 false} {n2 r2b g2b false} {n3 r3 g3 true}]" {
		t.Fatal(got)
	}
	h.ok(&fsmpb.Command{Op: &fsmpb.Command_RemoveMember{RemoveMember: &fsmpb.RemoveMember{NodeId: "n1"}}})
	h.ok(&fsmpb.Command{Op: &fsmpb.Command_RemoveMember{RemoveMember: &fsmpb.RemoveMember{NodeId: "n9"}}})
	want := "[{n2 r2b g2b false} {n3 r3 g3 true}]"
	if got := fmt.Sprint(h.f.Members()); got != want {
		t.Fatal(got)
	}
	g := New(Options{TempDir: t.TempDir()})
	if err := restoreBytes(g, snapshotBytes(t, h.f)); err != nil || fmt.Sprint(g.Members()) != want {
		t.Fatalf("restored members %v %v", g.Members(), err)
	}
}

// A member record without the voter flag is the record written before the
// flag existed: old snapshots read unchanged.
func TestMemberRecordFormat(t *testing.T) {
	old := appendStr(appendStr(appendStr(nil, "n1"), "r1"), "g1")
	if got := appendMember(nil, memberRec{id: "n1", raftAddr: "r1", grpcAddr: "g1"}); string(got) != string(old) {
		t.Fatalf("a member without the flag encodes as %q, want %q", got, old)
	}
	if got := appendMember(nil, memberRec{id: "n1", raftAddr: "r1", grpcAddr: "g1", voter: true}); string(got) != string(old)+"\x01" {
		t.Fatalf("a member to promote encodes as %q", got)
	}
}

func TestErrorsIs(t *testing.T) {
	h := newHarness(t)
	_, err := h.f.GetNamespace("x")
	if !errors.Is(err, ErrNotFound) || errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("errors.Is on %v", err)
	}
	if CodeInternal.String() != "Internal" || Code(99).String() != "Code(99)" {
		t.Fatal("Code.String")
	}
}

// The log holds valid strings only, because Encode refuses any other: Decode
// (the generated decoder) does not check them, and a snapshot could not be
// written with one.
func TestEncodeRefusesInvalidUTF8(t *testing.T) {
	for name, c := range map[string]*fsmpb.Command{
		"namespace name": cNS("n\xff"),
		"process id": {Now: epoch, Op: &fsmpb.Command_CreateLease{CreateLease: &fsmpb.CreateLease{
			NamespaceName: "ns", LeaseId: lid(9), ProcessId: "p\xfe", TtlSeconds: 10}}},
	} {
		if data, err := Encode(c); err == nil {
			t.Errorf("%s: Encode accepted a string that is not UTF-8 (%d bytes)", name, len(data))
		}
	}
}
