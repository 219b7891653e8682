// Command zkbench runs Grackle's benchmark workloads (package bench:
// pairs, handoff, leases, reads, expiry, locks, lockhandoff, waitgroup,
// barrier) against a ZooKeeper ensemble, through recipes written the way
// Apache Curator and ZooKeeper's own recipes do them: a session is the
// lease, the lock recipe for locks (lock.go), Curator's
// InterProcessSemaphoreV2 for semaphores (recipe.go), Curator's
// DistributedDoubleBarrier for barriers and a node per job for wait
// groups (waits.go). It prints the same results as `grackle bench`. It is
// its own module so that the ZooKeeper client never enters the product's
// module.
//
//	zkbench --endpoints 127.0.0.1:2181,... [--server-pids P,P,P] [-o json] all|pairs,handoff,...
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/grackle-coord/grackle/bench"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "zkbench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := pflag.NewFlagSet("zkbench", pflag.ContinueOnError)
	o := bench.Options{Target: "zookeeper"}
	o.Register(fs)
	endpoints := fs.StringSlice("endpoints", []string{"127.0.0.1:2181"}, "ZooKeeper client endpoints (host:port)")
	spread := fs.Bool("spread", false, "spread the workers' own sessions (reads, wait groups) over every endpoint; default: all on the leader")
	format := fs.StringP("output", "o", "table", "table (RESULT lines) or json")
	ws, err := bench.ParseCommand(fs, args, &o, format)
	if err != nil {
		return err
	}
	if len(*endpoints) == 0 {
		return fmt.Errorf("endpoints: at least one")
	}
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	leader, err := findLeader(lctx, *endpoints)
	if err != nil {
		return err
	}
	admin, err := dial(lctx, leader, workerTTL, true)
	if err != nil {
		return err
	}
	defer admin.Close()
	z := &ZK{servers: *endpoints, leader: leader, spread: *spread, admin: admin.Conn}
	return bench.RunAll(ctx, z, o, ws, os.Stdout)
}
