package rpc

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/grackle-coord/grackle/apierr"
	"github.com/grackle-coord/grackle/internal/peerconn"
	"github.com/grackle-coord/grackle/leader"
)

func healthCall(ctx context.Context, cc grpc.ClientConnInterface) error {
	_, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
	return err
}

func reasonOf(t *testing.T, err error) string {
	t.Helper()
	var le *leader.Error
	if !errors.As(err, &le) {
		t.Fatalf("want a *leader.Error, got %T %v", err, err)
	}
	return le.Reason
}

// A leader that cannot be reached: NOT_SENT, after a last try on a fresh
// connection.
func TestForwardUnreachableLeaderNotSent(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := lis.Addr().String()
	lis.Close()
	f := newForwarder("n2", func() (string, string) { return "n1", dead }, nil)
	defer f.close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err = f.forward(ctx, healthCall)
	if r := reasonOf(t, err); r != apierr.NotSent {
		t.Fatalf("reason %s, want NOT_SENT (%v)", r, err)
	}
	if f.peers.Dials() != forwardAttempts {
		t.Fatalf("%d connections made, want %d (the last try dials afresh)", f.peers.Dials(), forwardAttempts)
	}
	// The message names the leader and the cause, not gRPC's dial text.
	var le *leader.Error
	errors.As(err, &le)
	if !strings.HasPrefix(le.Msg, "could not reach the leader n1 at "+dead+": ") || !strings.Contains(le.Msg, "connection refused") ||
		strings.Contains(le.Msg, "transport:") || strings.Contains(le.Msg, "dial tcp") {
		t.Fatalf("message %q", le.Msg)
	}
}

// No leader known, the leader is this node, or the call was forwarded
// already: NOT_LEADER, and nothing is dialed.
func TestForwardNoLeaderNotLeader(t *testing.T) {
	cases := map[string]struct {
		id, addr string
		ctx      context.Context
	}{
		"no leader known":        {"", "", context.Background()},
		"leader address unknown": {"n1", "", context.Background()},
		"leader is self":         {"n2", "127.0.0.1:1", context.Background()},
		"forwarded already":      {"n1", "127.0.0.1:1", metadata.NewIncomingContext(context.Background(), metadata.Pairs(peerconn.ForwardedKey, "1"))},
	}
	for name, c := range cases {
		f := newForwarder("n2", func() (string, string) { return c.id, c.addr }, nil)
		err := f.forward(c.ctx, healthCall)
		if r := reasonOf(t, err); r != apierr.NotLeader || f.peers.Dials() != 0 {
			t.Errorf("%s: reason %s, %d dials", name, r, f.peers.Dials())
		}
		f.close()
	}
}

type answer struct {
	*health.Server
	err error
}

func (a answer) Check(context.Context, *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	return nil, a.err
}

// The leader's own errors pass on unchanged; an Unavailable without a
// reason from a request that was sent is OUTCOME_UNKNOWN, not retried.
func TestForwardRelaysLeaderErrors(t *testing.T) {
	leaderErr := apierr.New(codes.Unavailable, apierr.OutcomeUnknown, "n1", apierr.Leader{ID: "n1"}, "leadership lost")
	for name, c := range map[string]struct {
		err   error
		check func(error) bool
		dials int
	}{
		"leader's error": {leaderErr, func(err error) bool {
			return apierr.ReasonOf(err) == apierr.OutcomeUnknown && status.Convert(err).Message() == "leadership lost"
		}, 1},
		"sent, then broken": {status.Error(codes.Unavailable, "transport is closing"), func(err error) bool {
			var le *leader.Error
			return errors.As(err, &le) && le.Reason == apierr.OutcomeUnknown
		}, 1},
		"not found passes": {status.Error(codes.NotFound, "x"), func(err error) bool { return status.Code(err) == codes.NotFound }, 1},
	} {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		gs := grpc.NewServer()
		healthpb.RegisterHealthServer(gs, answer{health.NewServer(), c.err})
		go gs.Serve(lis)
		f := newForwarder("n2", func() (string, string) { return "n1", lis.Addr().String() }, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		err = f.forward(ctx, healthCall)
		if !c.check(err) || f.peers.Dials() != c.dials {
			t.Errorf("%s: got %v (%d dials)", name, err, f.peers.Dials())
		}
		cancel()
		f.close()
		gs.Stop()
	}
}
