package rpc_test

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grackle-coord/grackle/apierr"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// Bootstrap on a node without --acl is refused, naming the flag, and
// mints nothing: a token made there would become an admin on "*" the day
// access control is turned on.
func TestBootstrapNeedsACL(t *testing.T) {
	c := startOne(t)
	li := c.WaitLeader()
	_, err := pb.NewACLServiceClient(c.Conn(li)).Bootstrap(ctxT(t), &pb.BootstrapRequest{})
	if status.Code(err) != codes.FailedPrecondition || apierr.ReasonOf(err) != apierr.ACLDisabled {
		t.Fatalf("bootstrap without --acl: %v", err)
	}
	if want := "--acl"; !strings.Contains(status.Convert(err).Message(), want) {
		t.Fatalf("message %q does not name %s", status.Convert(err).Message(), want)
	}
}
