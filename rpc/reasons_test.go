package rpc_test

import (
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/grackle-coord/grackle/apierr"
	"github.com/grackle-coord/grackle/fsm"
	grleader "github.com/grackle-coord/grackle/leader"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
	"github.com/grackle-coord/grackle/server/servertest"
)

func wantReason(t *testing.T, err error, c codes.Code, reason string) {
	t.Helper()
	wantCode(t, err, c)
	if got := apierr.ReasonOf(err); got != reason {
		t.Fatalf("want reason %s, got %q (%v)", reason, got, err)
	}
}

func TestFSMReasonMatchesContract(t *testing.T) {
	for fsmReason, contract := range map[string]string{
		fsm.ReasonWeightExceedsPermits: apierr.WeightExceedsPermits,
		fsm.ReasonNamespaceNotFound:    apierr.NamespaceNotFound,
		fsm.ReasonSemaphoreNotFound:    apierr.SemaphoreNotFound,
		fsm.ReasonLeaseNotFound:        apierr.LeaseNotFound,
		fsm.ReasonTokenNotFound:        apierr.TokenNotFound,
		fsm.ReasonStateQuota:           apierr.StateQuota,
		fsm.ReasonOutOfRange:           apierr.OutOfRange,
		fsm.MetaMin:                    apierr.KeyMin,
		fsm.MetaMax:                    apierr.KeyMax,
		fsm.MetaPermits:                apierr.KeyPermits,
	} {
		if fsmReason != contract {
			t.Errorf("fsm and apierr disagree: %s vs %s", fsmReason, contract)
		}
	}
}

// Every NotFound says which thing is missing (its reason), answered by
// the leader or through a forwarding follower, so that a client tells a
// lost lease from a missing semaphore without reading the message.
func TestNotFoundReasons(t *testing.T) {
	c := servertest.Start(t, 3, nil)
	li := c.Leader()
	ids := seed(t, c.Client(li), "nf", "s", 1, 4, 60)
	const absent = "ls_NeverCreatedLease0000001"
	for name, i := range map[string]int{"leader": li, "follower": c.Follower()} {
		cl, cc := c.Client(i), c.ClusterClient(i)
		for what, cs := range map[string]struct {
			call   func() error
			reason string
		}{
			"GetNamespace": {func() error {
				_, err := cl.GetNamespace(ctxT(t), &pb.GetNamespaceRequest{NamespaceName: "none"})
				return err
			}, apierr.NamespaceNotFound},
			"CreateSemaphore in a missing namespace": {func() error {
				_, err := cl.CreateSemaphore(ctxT(t), &pb.CreateSemaphoreRequest{NamespaceName: "none", SemaphoreName: "s", Permits: 1})
				return err
			}, apierr.NamespaceNotFound},
			"GetSemaphore": {func() error {
				_, err := cl.GetSemaphore(ctxT(t), &pb.GetSemaphoreRequest{NamespaceName: "nf", SemaphoreName: "none"})
				return err
			}, apierr.SemaphoreNotFound},
			"AcquireSemaphore, missing semaphore": {func() error {
				_, err := cl.AcquireSemaphore(ctxT(t), &pb.AcquireSemaphoreRequest{NamespaceName: "nf", SemaphoreName: "none", LeaseId: ids[0], Weight: 1})
				return err
			}, apierr.SemaphoreNotFound},
			"AcquireSemaphore, missing lease": {func() error {
				_, err := cl.AcquireSemaphore(ctxT(t), &pb.AcquireSemaphoreRequest{NamespaceName: "nf", SemaphoreName: "s", LeaseId: absent, Weight: 1, TimeoutSeconds: 5})
				return err
			}, apierr.LeaseNotFound},
			"GetSemaphoreLease": {func() error {
				_, err := cl.GetSemaphoreLease(ctxT(t), &pb.GetSemaphoreLeaseRequest{NamespaceName: "nf", LeaseId: absent})
				return err
			}, apierr.LeaseNotFound},
			"RefreshSemaphoreLease": {func() error {
				_, err := cl.RefreshSemaphoreLease(ctxT(t), &pb.RefreshSemaphoreLeaseRequest{NamespaceName: "nf", LeaseId: absent, TtlSeconds: 10})
				return err
			}, apierr.LeaseNotFound},
			"RevokeSemaphoreLease": {func() error {
				_, err := cl.RevokeSemaphoreLease(ctxT(t), &pb.RevokeSemaphoreLeaseRequest{NamespaceName: "nf", LeaseId: absent})
				return err
			}, apierr.LeaseNotFound},
			"ListSemaphoreHolders": {func() error {
				_, err := cl.ListSemaphoreHolders(ctxT(t), &pb.ListSemaphoreHoldersRequest{NamespaceName: "nf", SemaphoreName: "none"})
				return err
			}, apierr.SemaphoreNotFound},
			"ListSemaphoreWaiters": {func() error {
				_, err := cl.ListSemaphoreWaiters(ctxT(t), &pb.ListSemaphoreWaitersRequest{NamespaceName: "nf", SemaphoreName: "none"})
				return err
			}, apierr.SemaphoreNotFound},
			"WatchSemaphore": {func() error {
				st, err := cl.WatchSemaphore(ctxT(t), &pb.WatchSemaphoreRequest{NamespaceName: "nf", SemaphoreName: "none"})
				if err == nil {
					_, err = st.Recv()
				}
				return err
			}, apierr.SemaphoreNotFound},
			"RemoveMember": {func() error {
				_, err := cc.RemoveMember(ctxT(t), &pb.RemoveMemberRequest{NodeId: "nobody"})
				return err
			}, apierr.MemberNotFound},
		} {
			t.Run(what+" via "+name, func(t *testing.T) { wantReason(t, cs.call(), codes.NotFound, cs.reason) })
		}
	}

	// Waiters whose lease, semaphore or namespace goes away.
	l := c.Client(li)
	acquireNow(t, l, "nf", "s", ids[0], 1)
	byRevoke := acquireAsync(l, "nf", "s", ids[1], 1, 60)
	waitQueue(t, c, "nf", "s", 1)
	bySemDelete := acquireAsync(l, "nf", "s", ids[2], 1, 60)
	waitQueue(t, c, "nf", "s", 2)
	must(l.RevokeSemaphoreLease(ctxT(t), &pb.RevokeSemaphoreLeaseRequest{NamespaceName: "nf", LeaseId: ids[1]}))
	wantReason(t, recv(t, byRevoke).err, codes.NotFound, apierr.LeaseNotFound)
	must(l.DeleteSemaphore(ctxT(t), &pb.DeleteSemaphoreRequest{NamespaceName: "nf", SemaphoreName: "s"}))
	wantReason(t, recv(t, bySemDelete).err, codes.NotFound, apierr.SemaphoreNotFound)
	must(l.CreateSemaphore(ctxT(t), &pb.CreateSemaphoreRequest{NamespaceName: "nf", SemaphoreName: "s2", Permits: 1}))
	acquireNow(t, l, "nf", "s2", ids[0], 1)
	byNSDelete := acquireAsync(l, "nf", "s2", ids[3], 1, 60)
	waitQueue(t, c, "nf", "s2", 1)
	must(l.DeleteNamespace(ctxT(t), &pb.DeleteNamespaceRequest{NamespaceName: "nf"}))
	wantReason(t, recv(t, byNSDelete).err, codes.NotFound, apierr.NamespaceNotFound)
}

// Every error that matters for retrying carries its reason, answered by
// the leader or passed on through a forwarding follower, with the leader's
// id and address.
func TestErrorReasons(t *testing.T) {
	c := servertest.Start(t, 3, nil)
	li, fi := c.Leader(), c.Follower()
	leader := apierr.Leader{ID: c.Cfgs[li].NodeID, Address: c.Nodes[li].GRPCAddr()}

	t.Run("not the leader (a follower never forwards twice)", func(t *testing.T) {
		// A write: a follower serves reads itself (follower reads).
		ctx := metadata.AppendToOutgoingContext(ctxT(t), "grackle-forwarded", "1")
		_, err := c.Client(fi).DeleteNamespace(ctx, &pb.DeleteNamespaceRequest{NamespaceName: "x"})
		wantReason(t, err, codes.Unavailable, apierr.NotLeader)
		if got := apierr.LeaderOf(err); got != leader {
			t.Fatalf("leader %+v, want %+v", got, leader)
		}
	})

	ids := seed(t, c.Client(li), "reasons", "s", 1, 3, 60)
	for name, i := range map[string]int{"leader": li, "follower": fi} {
		cl := c.Client(i)
		t.Run("weight exceeds permits via "+name, func(t *testing.T) {
			_, err := cl.AcquireSemaphore(ctxT(t), &pb.AcquireSemaphoreRequest{NamespaceName: "reasons", SemaphoreName: "s", LeaseId: ids[0], Weight: 2})
			wantReason(t, err, codes.InvalidArgument, apierr.WeightExceedsPermits)
		})
	}
	acquireNow(t, c.Client(li), "reasons", "s", ids[0], 1)

	t.Run("superseded via follower", func(t *testing.T) {
		first := acquireAsync(c.Client(fi), "reasons", "s", ids[1], 1, 60)
		waitQueue(t, c, "reasons", "s", 1)
		servertest.Eventually(t, "the first call waits", 20*time.Second, func() bool {
			ws := c.Nodes[li].API.Leader().Term().Waiters("reasons", "s")
			return len(ws) == 1 && ws[0].State == grleader.Waiting
		})
		second := acquireAsync(c.Client(fi), "reasons", "s", ids[1], 1, 1)
		r := recv(t, first)
		wantReason(t, r.err, codes.Aborted, apierr.Superseded)
		recv(t, second)
	})

	t.Run("leadership lost while waiting, on the leader and via a follower", func(t *testing.T) {
		direct := acquireAsync(c.Client(li), "reasons", "s", ids[1], 1, 60)
		waitQueue(t, c, "reasons", "s", 1)
		forwarded := acquireAsync(c.Client(fi), "reasons", "s", ids[2], 1, 60)
		waitQueue(t, c, "reasons", "s", 2)
		must(c.TransferLeadership(ctxT(t), li, ""))
		for _, ch := range []chan acqResult{direct, forwarded} {
			r := recv(t, ch)
			wantReason(t, r.err, codes.Unavailable, apierr.OutcomeUnknown)
			if apierr.ProvesNotSent(r.err) {
				t.Fatal("a waiting acquire's outcome is unknown")
			}
		}
	})
}

// An InvalidArgument about one field names it in a BadRequest detail, and
// a number out of its bounds carries them (reason OUT_OF_RANGE), whether
// the API layer or the state machine refused it, on the leader or through
// a forwarding follower: a client points at what its user gave without
// reading the message.
func TestFieldDetails(t *testing.T) {
	c := servertest.Start(t, 3, nil)
	li := c.Leader()
	ids := seed(t, c.Client(li), "fd", "s", 5, 1, 60)
	type want struct {
		field    string
		bounds   apierr.Bounds
		inRange  bool // want bounds
		metadata map[string]string
	}
	for name, i := range map[string]int{"leader": li, "follower": c.Follower()} {
		cl, cc := c.Client(i), c.ClusterClient(i)
		for what, cs := range map[string]struct {
			call func() error
			want want
		}{
			"timeout_seconds (rpc)": {func() error {
				_, err := cl.AcquireSemaphore(ctxT(t), &pb.AcquireSemaphoreRequest{NamespaceName: "fd", SemaphoreName: "s", LeaseId: ids[0], Weight: 1, TimeoutSeconds: 600})
				return err
			}, want{field: "timeout_seconds", bounds: apierr.Bounds{Min: 0, Max: 300, HasMax: true}, inRange: true}},
			"ttl_seconds (fsm)": {func() error {
				_, err := cl.CreateSemaphoreLease(ctxT(t), &pb.CreateSemaphoreLeaseRequest{NamespaceName: "fd", ProcessId: "p", TtlSeconds: 330})
				return err
			}, want{field: "ttl_seconds", bounds: apierr.Bounds{Min: 1, Max: 300, HasMax: true}, inRange: true}},
			"weight without upper bound": {func() error {
				_, err := cl.AcquireSemaphore(ctxT(t), &pb.AcquireSemaphoreRequest{NamespaceName: "fd", SemaphoreName: "s", LeaseId: ids[0], Weight: -1})
				return err
			}, want{field: "weight", bounds: apierr.Bounds{Min: 1}, inRange: true}},
			"weight exceeds permits (applied)": {func() error {
				_, err := cl.AcquireSemaphore(ctxT(t), &pb.AcquireSemaphoreRequest{NamespaceName: "fd", SemaphoreName: "s", LeaseId: ids[0], Weight: 6})
				return err
			}, want{field: "weight", metadata: map[string]string{apierr.KeyPermits: "5"}}},
			"semaphore_name": {func() error {
				_, err := cl.CreateSemaphore(ctxT(t), &pb.CreateSemaphoreRequest{NamespaceName: "fd", SemaphoreName: "bad name", Permits: 1})
				return err
			}, want{field: "semaphore_name"}},
			"expected_version (applied)": {func() error {
				_, err := cl.UpdateNamespace(ctxT(t), &pb.UpdateNamespaceRequest{NamespaceName: "fd", ExpectedVersion: 99})
				return err
			}, want{field: "expected_version"}},
			"raft_address": {func() error {
				_, err := cc.AddMember(ctxT(t), &pb.AddMemberRequest{NodeId: "n9", RaftAddress: "nohostport", GrpcAddress: "127.0.0.1:1"})
				return err
			}, want{field: "raft_address"}},
		} {
			err := cs.call()
			wantCode(t, err, codes.InvalidArgument)
			field, desc := apierr.FieldOf(err)
			if field != cs.want.field || desc == "" {
				t.Errorf("%s, %s: field %q (%q), want %q; err %v", name, what, field, desc, cs.want.field, err)
			}
			b, ok := apierr.BoundsOf(err)
			if ok != cs.want.inRange || b != cs.want.bounds {
				t.Errorf("%s, %s: bounds %+v %v, want %+v %v", name, what, b, ok, cs.want.bounds, cs.want.inRange)
			}
			for k, v := range cs.want.metadata {
				if got := apierr.Info(err).GetMetadata()[k]; got != v {
					t.Errorf("%s, %s: metadata %s = %q, want %q", name, what, k, got, v)
				}
			}
		}
	}
}
