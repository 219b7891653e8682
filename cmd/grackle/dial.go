package main

// Raw connections for `grackle bench`, which measures the server, not the
// client: it dials the leader (and, with spread, every endpoint) itself.
// Every other command goes through client/ (see call in client.go).

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/grackle-coord/grackle/internal/flowwindow"
	"github.com/grackle-coord/grackle/tlsutil"
)

// dialFirst is dialFirst with the client flags' credentials.
func (a *app) dialFirst(ctx context.Context, perTry time.Duration) (*grpc.ClientConn, string, error) {
	return dialFirst(ctx, a.endpoints, perTry, a)
}

// dialFirst returns a ready connection to the first endpoint that accepts
// one within perTry. The server forwards calls to the leader, so any
// reachable node will do. a (if not nil) gives the credentials.
func dialFirst(ctx context.Context, endpoints []string, perTry time.Duration, a ...*app) (*grpc.ClientConn, string, error) {
	var why []string
	for _, ep := range endpoints {
		var (
			mu      sync.Mutex
			lastErr error
		)
		opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
		if len(a) > 0 && a[0] != nil {
			opts = a[0].dialOptions(func(err error) {
				mu.Lock()
				lastErr = err
				mu.Unlock()
			})
		}
		dialer := func(ctx context.Context, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
			if err != nil {
				mu.Lock()
				lastErr = err
				mu.Unlock()
			}
			return c, err
		}
		conn, err := grpc.NewClient(ep, append(opts, grpc.WithContextDialer(dialer))...)
		if err != nil {
			why = append(why, fmt.Sprintf("%s: %v", ep, err))
			continue
		}
		tctx, cancel := context.WithTimeout(ctx, perTry)
		ok := waitReady(tctx, conn)
		cancel()
		if ok {
			return conn, ep, nil
		}
		conn.Close()
		if ctx.Err() != nil {
			return nil, "", ctx.Err()
		}
		mu.Lock()
		reason := "not reachable within " + perTry.String()
		var opErr *net.OpError
		if errors.As(lastErr, &opErr) && opErr.Err != nil {
			reason = opErr.Err.Error() // "connect: connection refused"
		} else if lastErr != nil {
			reason = lastErr.Error()
		}
		mu.Unlock()
		why = append(why, fmt.Sprintf("%s: %s", ep, reason))
	}
	return nil, "", status.Errorf(codes.Unavailable, "no endpoint reachable (%s)", strings.Join(why, "; "))
}

// waitReady connects conn and waits until it is ready (true) or has
// failed or ctx is done (false).
func waitReady(ctx context.Context, conn *grpc.ClientConn) bool {
	conn.Connect()
	for {
		s := conn.GetState()
		switch s {
		case connectivity.Ready:
			return true
		case connectivity.TransientFailure, connectivity.Shutdown:
			return false
		}
		if !conn.WaitForStateChange(ctx, s) {
			return false
		}
	}
}

// dialOptions are the transport credentials and token of the client
// flags. onHandshake sees each TLS handshake error.
func (a *app) dialOptions(onHandshake func(error)) []grpc.DialOption {
	creds := insecure.NewCredentials()
	if a.tls != nil {
		cfg := a.tls
		creds = tlsutil.ClientCreds(func() *tls.Config { return cfg }, onHandshake)
	}
	opts := append([]grpc.DialOption{grpc.WithTransportCredentials(creds)}, flowwindow.DialOptions()...)
	if a.token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(tlsutil.Token(a.token)))
	}
	return opts
}
