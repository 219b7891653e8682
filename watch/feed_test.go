package watch

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/grackle-coord/grackle/fsm"
	fsmpb "github.com/grackle-coord/grackle/proto/grackle/fsm/v1"
)

func encode(t *testing.T, cmd *fsmpb.Command) []byte {
	t.Helper()
	b, err := fsm.Encode(cmd)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The commands the leader packs into one Batch entry each count as a
// change of the semaphores they touch; other semaphores' subscribers are
// not woken; nobody watching means the apply path records nothing.
func TestFeedSeesEveryCommandOfABatch(t *testing.T) {
	f := fsm.New(fsm.Options{TempDir: t.TempDir()})
	fd := NewFeed(f)
	defer fd.Close()
	o := Observe(f, fd)

	apply := func(index uint64, cmd *fsmpb.Command) {
		t.Helper()
		o.ApplyBatch([]*raft.Log{{Index: index, Type: raft.LogCommand, Data: encode(t, cmd)}})
	}
	apply(1, &fsmpb.Command{Now: 1, Op: &fsmpb.Command_CreateNamespace{CreateNamespace: &fsmpb.CreateNamespace{Name: "ns"}}})
	if n := fd.Dispatched.Load(); n != 0 {
		t.Fatalf("with nobody watching the feed saw %d entries", n)
	}
	a := fd.Subscribe(fsm.SemKey{Namespace: "ns", Semaphore: "a"})
	b := fd.Subscribe(fsm.SemKey{Namespace: "ns", Semaphore: "b"})
	other := fd.Subscribe(fsm.SemKey{Namespace: "ns", Semaphore: "other"})
	sem := func(name string) []byte {
		return encode(t, &fsmpb.Command{Now: 2, Op: &fsmpb.Command_CreateSemaphore{CreateSemaphore: &fsmpb.CreateSemaphore{NamespaceName: "ns", Name: name, Permits: 1}}})
	}
	apply(2, &fsmpb.Command{Now: 2, Op: &fsmpb.Command_Batch{Batch: &fsmpb.Batch{Commands: [][]byte{sem("a"), sem("b"), encode(t, &fsmpb.Command{Now: 2,
		Op: &fsmpb.Command_UpdateSemaphore{UpdateSemaphore: &fsmpb.UpdateSemaphore{NamespaceName: "ns", Name: "a", Permits: 2, ExpectedVersion: 1}}})}}}})
	for _, s := range []*Sub{a, b} {
		select {
		case <-s.Wake():
		case <-time.After(10 * time.Second):
			t.Fatalf("subscriber of %s not woken by the batch", s.key.Semaphore)
		}
	}
	// The dispatcher has noted the whole entry once it was woken for b.
	deadline := time.Now().Add(10 * time.Second)
	for fd.Dispatched.Load() < 1 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if ca, _ := a.Take(); ca != 2 {
		t.Errorf("a: %d changes, want 2 (created, then updated, in one entry)", ca)
	}
	if cb, _ := b.Take(); cb != 1 {
		t.Errorf("b: %d changes, want 1", cb)
	}
	select {
	case <-other.Wake():
		t.Error("a semaphore the batch did not touch was woken")
	default:
	}
}
