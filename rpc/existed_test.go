package rpc_test

import (
	"testing"

	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
	"github.com/grackle-coord/grackle/server/servertest"
)

// Deletes and releases say whether there was anything to delete or
// release (docs/API.md, Namespaces and Semaphores), also through a
// forwarding follower, so that a client can tell the user.
func TestDeleteAndReleaseSayWhetherSomethingExisted(t *testing.T) {
	c := servertest.Start(t, 3, nil)
	for _, via := range []int{c.Leader(), c.Follower()} {
		cl := c.Client(via)
		ctx := ctxT(t)
		ids := seed(t, cl, "ex", "s", 2, 1, 60)
		must(cl.AcquireSemaphore(ctx, &pb.AcquireSemaphoreRequest{NamespaceName: "ex", SemaphoreName: "s", LeaseId: ids[0], Weight: 1}))
		if r := must(cl.ReleaseSemaphore(ctx, &pb.ReleaseSemaphoreRequest{NamespaceName: "ex", SemaphoreName: "s", LeaseId: ids[0]})); !r.Released {
			t.Fatal("release of a hold: released=false")
		}
		if r := must(cl.ReleaseSemaphore(ctx, &pb.ReleaseSemaphoreRequest{NamespaceName: "ex", SemaphoreName: "s", LeaseId: ids[0]})); r.Released {
			t.Fatal("second release: released=true")
		}
		if r := must(cl.DeleteSemaphore(ctx, &pb.DeleteSemaphoreRequest{NamespaceName: "ex", SemaphoreName: "s"})); !r.Existed {
			t.Fatal("delete of a semaphore: existed=false")
		}
		if r := must(cl.DeleteSemaphore(ctx, &pb.DeleteSemaphoreRequest{NamespaceName: "ex", SemaphoreName: "s"})); r.Existed {
			t.Fatal("second semaphore delete: existed=true")
		}
		if r := must(cl.DeleteNamespace(ctx, &pb.DeleteNamespaceRequest{NamespaceName: "ex"})); !r.Existed {
			t.Fatal("delete of a namespace: existed=false")
		}
		if r := must(cl.DeleteNamespace(ctx, &pb.DeleteNamespaceRequest{NamespaceName: "ex"})); r.Existed {
			t.Fatal("second namespace delete: existed=true")
		}
	}
}
