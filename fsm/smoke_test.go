package fsm

import (
	"bytes"
	"testing"

	fsmpb "github.com/grackle-coord/grackle/proto/grackle/fsm/v1"
)

func TestSmoke(t *testing.T) {
	f := New(Options{})
	var i uint64
	ap := func(c *fsmpb.Command) *Result { i++; c.Now = int64(i) * 1e9; return f.ApplyCommand(i, c) }
	r := ap(&fsmpb.Command{Op: &fsmpb.Command_CreateNamespace{CreateNamespace: &fsmpb.CreateNamespace{Name: "third_parties"}}})
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	r = ap(&fsmpb.Command{Op: &fsmpb.Command_CreateSemaphore{CreateSemaphore: &fsmpb.CreateSemaphore{NamespaceName: "third_parties", Name: "p1", Permits: 20}}})
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	lid := "ls_abcdefghijklmnopqrstuv"
	r = ap(&fsmpb.Command{Op: &fsmpb.Command_CreateLease{CreateLease: &fsmpb.CreateLease{NamespaceName: "third_parties", LeaseId: lid, ProcessId: "host-123/pid-4567", TtlSeconds: 60}}})
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	r = ap(&fsmpb.Command{Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{Grant: &fsmpb.Grant{NamespaceName: "third_parties", SemaphoreName: "p1", LeaseId: lid, Weight: 3}}}})
	if r.Err != nil || !r.Acquired || r.Semaphore.ActiveHolds != 3 || r.Holder.FencingToken != 4 {
		t.Fatal(r.Err, r)
	}
	if err := f.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	var b1 bytes.Buffer
	if err := f.WriteSnapshot(&b1); err != nil {
		t.Fatal(err)
	}
	g := New(Options{})
	if err := g.Restore(nopCloser{bytes.NewReader(b1.Bytes())}); err != nil {
		t.Fatal(err)
	}
	var b2 bytes.Buffer
	g.WriteSnapshot(&b2)
	if !bytes.Equal(b1.Bytes(), b2.Bytes()) {
		t.Fatal("snapshot differs")
	}
	p, err := g.ListSemaphoreHolders("third_parties", "p1", 0, "", 5e9)
	if err != nil || len(p.Items) != 1 {
		t.Fatal(err, p)
	}
	r = ap(&fsmpb.Command{Op: &fsmpb.Command_Release{Release: &fsmpb.Release{NamespaceName: "third_parties", SemaphoreName: "p1", LeaseId: lid}}})
	if r.Err != nil || r.Semaphore.ActiveHolds != 0 {
		t.Fatal(r)
	}
	t.Log(b1.Len())
}

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }
