package apierr_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/grackle-coord/grackle/apierr"
)

func TestRoundTrip(t *testing.T) {
	err := apierr.New(codes.Unavailable, apierr.NotLeader, "n2", apierr.Leader{ID: "n1", Address: "10.0.0.1:7420"}, "node n2: not the leader")
	if status.Code(err) != codes.Unavailable || apierr.ReasonOf(err) != apierr.NotLeader || !apierr.ProvesNotSent(err) {
		t.Fatalf("got %v reason %q", err, apierr.ReasonOf(err))
	}
	if l := apierr.LeaderOf(err); l != (apierr.Leader{ID: "n1", Address: "10.0.0.1:7420"}) {
		t.Fatalf("leader %+v", l)
	}
	if apierr.Info(err).GetMetadata()[apierr.KeyNode] != "n2" {
		t.Fatalf("node: %v", apierr.Info(err))
	}
	// Wrapped errors are read through.
	if apierr.ReasonOf(wrapped{err}) != apierr.NotLeader {
		t.Fatal("wrapped reason lost")
	}
	// An existing reason is never replaced.
	if r := apierr.ReasonOf(apierr.Annotate(err, apierr.NotSent, "", apierr.Leader{})); r != apierr.NotLeader {
		t.Fatalf("annotate replaced the reason: %s", r)
	}
	u := apierr.New(codes.Unavailable, apierr.OutcomeUnknown, "n1", apierr.Leader{}, "x")
	if apierr.ProvesNotSent(u) || apierr.ProvesNotSent(status.Error(codes.Unavailable, "not the leader")) || apierr.ProvesNotSent(nil) {
		t.Fatal("only NOT_LEADER and NOT_SENT prove the call was not sent")
	}
	if apierr.LeaderOf(u) != (apierr.Leader{}) || apierr.LeaderOf(errors.New("plain")) != (apierr.Leader{}) {
		t.Fatal("leader from nowhere")
	}
}

type wrapped struct{ error }

func (w wrapped) Unwrap() error { return w.error }

// deadConn is a client with apierr's dial options to a loopback address
// nobody listens on (dead); closed when the test ends.
func deadConn(t *testing.T) (cc *grpc.ClientConn, dead string) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead = lis.Addr().String()
	lis.Close()
	cc, err = grpc.NewClient(dead, append(apierr.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc, dead
}

// A call on a connection that could never be made is marked NOT_SENT; a
// server's own Unavailable (sent, answered) is left without a reason.
func TestDialOptionsMarkUnsent(t *testing.T) {
	cc, _ := deadConn(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
	if status.Code(err) != codes.Unavailable || apierr.ReasonOf(err) != apierr.NotSent {
		t.Fatalf("refused connection: got %v, reason %q", err, apierr.ReasonOf(err))
	}

	// A live server whose answer is Unavailable: the request was sent.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	hs := health.NewServer()
	hs.SetServingStatus("x", healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(gs, unavailableHealth{hs})
	go gs.Serve(lis)
	defer gs.Stop()
	cc2, err := grpc.NewClient(lis.Addr().String(), append(apierr.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cc2.Close()
	_, err = healthpb.NewHealthClient(cc2).Check(ctx, &healthpb.HealthCheckRequest{})
	if status.Code(err) != codes.Unavailable || apierr.ReasonOf(err) != "" {
		t.Fatalf("answered Unavailable: got %v, reason %q", err, apierr.ReasonOf(err))
	}
}

type unavailableHealth struct{ *health.Server }

func (unavailableHealth) Check(context.Context, *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	return nil, status.Error(codes.Unavailable, "no")
}

// A stream that never got a connection is marked NOT_SENT, as a unary
// call is; Relayed turns such a hop failure into an error naming the
// leader and the cause, and passes a node's own answer on.
func TestStreamsMarkUnsentAndRelayed(t *testing.T) {
	cc, dead := deadConn(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := func() error {
		s, err := healthpb.NewHealthClient(cc).Watch(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			return err
		}
		_, err = s.Recv()
		return err
	}()
	if status.Code(err) != codes.Unavailable || apierr.ReasonOf(err) != apierr.NotSent {
		t.Fatalf("a stream to a refused connection: %v, reason %q", err, apierr.ReasonOf(err))
	}
	if c := apierr.HopCause(err); !strings.Contains(c, "connection refused") || strings.Contains(c, "transport") || strings.Contains(c, dead) {
		t.Fatalf("HopCause %q", c)
	}
	l := apierr.Leader{ID: "n1", Address: dead}
	r := apierr.Relayed(err, "n2", l)
	if status.Code(r) != codes.Unavailable || apierr.ReasonOf(r) != apierr.NotSent || apierr.LeaderOf(r) != l ||
		!strings.Contains(status.Convert(r).Message(), "could not reach the leader n1 at "+dead) {
		t.Fatalf("Relayed: %v", r)
	}
	if r := apierr.Relayed(status.Error(codes.Unavailable, "transport is closing"), "n2", l); apierr.ReasonOf(r) != apierr.OutcomeUnknown {
		t.Fatalf("a hop broken after sending: %v", r)
	}
	own := apierr.New(codes.Unavailable, apierr.NotLeader, "n1", apierr.Leader{}, "not the leader")
	if r := apierr.Relayed(own, "n2", l); r != own {
		t.Fatalf("the leader's own answer changed: %v", r)
	}
	if r := apierr.Relayed(status.Error(codes.NotFound, "x"), "n2", l); status.Code(r) != codes.NotFound || apierr.ReasonOf(r) != "" {
		t.Fatalf("NotFound changed: %v", r)
	}
}
