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
	if fsm.ReasonWeightExceedsPermits != apierr.WeightExceedsPermits {
		t.Fatal("fsm and apierr disagree on WEIGHT_EXCEEDS_PERMITS")
	}
}

// Every error that matters for retrying carries its reason, answered by
// the leader or passed on through a forwarding follower, with the leader's
// id and address.
func TestErrorReasons(t *testing.T) {
	c := servertest.Start(t, 3, nil)
	li, fi := c.Leader(), c.Follower()
	leader := apierr.Leader{ID: c.Cfgs[li].NodeID, Address: c.Nodes[li].GRPCAddr()}

	t.Run("not the leader (a follower never forwards twice)", func(t *testing.T) {
		ctx := metadata.AppendToOutgoingContext(ctxT(t), "grackle-forwarded", "1")
		_, err := c.Client(fi).GetNamespace(ctx, &pb.GetNamespaceRequest{NamespaceName: "x"})
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
		must(c.ClusterClient(li).TransferLeadership(ctxT(t), &pb.TransferLeadershipRequest{}))
		for _, ch := range []chan acqResult{direct, forwarded} {
			r := recv(t, ch)
			wantReason(t, r.err, codes.Unavailable, apierr.OutcomeUnknown)
			if apierr.ProvesNotSent(r.err) {
				t.Fatal("a waiting acquire's outcome is unknown")
			}
		}
	})
}
