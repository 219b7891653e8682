package server_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grackle-coord/grackle/acl"
	"github.com/grackle-coord/grackle/apierr"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// A watch stream lives as long as its token: revoking the token ends every
// watch opened with it, on the leader and on the followers that relay
// theirs, with Unauthenticated, while a watch with another token goes on.
func TestRevokeEndsWatches(t *testing.T) {
	c, root := aclCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var leaderIdx int
	withToken(t, c, root, func() { leaderIdx = c.WaitLeader() })
	rctx := tokenCtx(ctx, root)
	g := pb.NewGrackleServiceClient(c.Conn(leaderIdx))
	for _, call := range []func() error{
		func() error { _, err := g.CreateNamespace(rctx, &pb.CreateNamespaceRequest{Name: "ns1"}); return err },
		func() error {
			_, err := g.CreateSemaphore(rctx, &pb.CreateSemaphoreRequest{NamespaceName: "ns1", SemaphoreName: "s", Permits: 1})
			return err
		},
	} {
		if err := answered(t, "setup", call); err != nil {
			t.Fatal(err)
		}
	}
	var reader *pb.CreateTokenResponse
	if err := answered(t, "CreateToken", func() (err error) {
		reader, err = pb.NewACLServiceClient(c.Conn(leaderIdx)).CreateToken(rctx, &pb.CreateTokenRequest{Role: "read", Namespace: "ns1"})
		return err
	}); err != nil {
		t.Fatal(err)
	}

	type watch struct {
		name string
		end  chan error
	}
	open := func(name string, i int, secret string, lock bool) watch {
		w := watch{name: name, end: make(chan error, 1)}
		wctx := tokenCtx(ctx, secret)
		api := pb.NewGrackleServiceClient(c.Conn(i))
		var recv func() error
		if lock {
			st, err := api.WatchLock(wctx, &pb.WatchLockRequest{NamespaceName: "ns1", LockName: "l"})
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			recv = func() error { _, err := st.Recv(); return err }
		} else {
			st, err := api.WatchSemaphore(wctx, &pb.WatchSemaphoreRequest{NamespaceName: "ns1", SemaphoreName: "s"})
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			recv = func() error { _, err := st.Recv(); return err }
		}
		// The first message says the watch is admitted and running.
		if err := recv(); err != nil {
			t.Fatalf("%s: first message: %v", name, err)
		}
		go func() {
			for {
				if err := recv(); err != nil {
					w.end <- err
					return
				}
			}
		}()
		return w
	}
	var revoked []watch
	for i := range c.Nodes {
		// A follower applies the token before it admits it itself.
		for _, lock := range []bool{false, true} {
			kind := "semaphore"
			if lock {
				kind = "lock"
			}
			revoked = append(revoked, open(fmt.Sprintf("%s watch on node %d", kind, i), i, reader.Secret, lock))
		}
	}
	kept := open("the root token's watch", leaderIdx, root, false)

	if err := answered(t, "RevokeToken", func() error {
		_, err := pb.NewACLServiceClient(c.Conn(leaderIdx)).RevokeToken(rctx, &pb.RevokeTokenRequest{Id: reader.Token.Id})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for _, w := range revoked {
		select {
		case err := <-w.end:
			if status.Code(err) != codes.Unauthenticated || apierr.ReasonOf(err) != acl.ReasonTokenUnknown {
				t.Errorf("%s ended with %v, want Unauthenticated %s", w.name, err, acl.ReasonTokenUnknown)
			}
		case <-ctx.Done():
			t.Fatalf("%s still runs after its token was revoked", w.name)
		}
	}
	select {
	case err := <-kept.end:
		t.Fatalf("%s ended: %v", kept.name, err)
	default:
	}
}
