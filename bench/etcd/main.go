// Command etcdbench runs Grackle's benchmark workloads (package bench:
// pairs, handoff, leases, reads, expiry, locks, lockhandoff, waitgroup,
// barrier) against etcd, through the lease-owned semaphore recipe of
// recipe.go, for the lock workloads etcd's own concurrency.Mutex
// (mutex.go), for the barrier etcd's recipe DoubleBarrier and for wait
// groups a key per job with a count-and-watch waiter (waits.go), and
// prints the same results as `grackle bench`. It is its own module so that etcd's client never
// enters the product's module.
//
//	etcdbench --endpoints 127.0.0.1:2379 [--server-pids P,P,P] [-o json] all|pairs,handoff,...
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/grackle-coord/grackle/bench"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "etcdbench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := pflag.NewFlagSet("etcdbench", pflag.ContinueOnError)
	o := bench.Options{Target: "etcd"}
	o.Register(fs)
	endpoints := fs.StringSlice("endpoints", []string{"127.0.0.1:2379"}, "etcd client endpoints")
	spread := fs.Bool("spread", false, "spread the clients over every endpoint in turn (followers forward writes); default: the leader only")
	format := fs.StringP("output", "o", "table", "table (RESULT lines) or json")
	ws, err := bench.ParseCommand(fs, args, &o, format)
	if err != nil {
		return err
	}
	newClient := func(eps []string) (*clientv3.Client, error) {
		return clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	}
	status, err := newClient(*endpoints)
	if err != nil {
		return err
	}
	defer status.Close()
	leader, err := findLeader(ctx, status, *endpoints)
	if err != nil {
		return err
	}
	e := &Etcd{status: status, leader: leader}
	work := []string{leader}
	if *spread {
		work = *endpoints
	}
	// Conns clients in all, each on one endpoint (with spread, the
	// endpoints in turn): the shape of Grackle's --conns, conns worker
	// processes each with its connection.
	for i := 0; i < max(o.Conns, len(work)); i++ {
		c, err := newClient(work[i%len(work) : i%len(work)+1])
		if err != nil {
			return err
		}
		defer c.Close()
		e.clients = append(e.clients, c)
	}
	return bench.RunAll(ctx, e, o, ws, os.Stdout)
}

// findLeader returns the endpoint of the member that leads.
func findLeader(ctx context.Context, c *clientv3.Client, endpoints []string) (string, error) {
	var last error
	for try := 0; try < 50; try++ {
		for _, ep := range endpoints {
			sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			st, err := c.Status(sctx, ep)
			cancel()
			if err != nil {
				last = err
				continue
			}
			if st.Leader != 0 && st.Leader == st.Header.MemberId {
				return ep, nil
			}
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return "", fmt.Errorf("no etcd leader among %v (last error: %v)", endpoints, last)
}
