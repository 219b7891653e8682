// Command watchload opens many WatchSemaphore streams on the semaphores of
// a `grackle bench` run, to measure what watchers cost the leader
// (docs/watch.md, Overhead). It waits for the run's namespace (the newest
// "bench-*") and its semaphores, spreads -watchers streams over them
// round-robin through the Go client, reads every message, and prints how
// many it received when -duration ends.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grackle-coord/grackle/client"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

func main() {
	endpoints := flag.String("endpoints", "127.0.0.1:7420", "gRPC addresses of some members, comma-separated")
	watchers := flag.Int("watchers", 100, "streams to open")
	nsPrefix := flag.String("ns-prefix", "bench-", "watch the newest namespace with this prefix")
	semPrefix := flag.String("sem-prefix", "pairs-", "watch its semaphores with this prefix")
	minSems := flag.Int("min-semaphores", 64, "wait until this many semaphores exist")
	duration := flag.Duration("duration", 20*time.Second, "how long to watch once the streams are open")
	wait := flag.Duration("wait", 60*time.Second, "how long to wait for the namespace and semaphores")
	flag.Parse()
	if err := run(strings.Split(*endpoints, ","), *watchers, *nsPrefix, *semPrefix, *minSems, *duration, *wait); err != nil {
		fmt.Fprintln(os.Stderr, "watchload:", err)
		os.Exit(1)
	}
}

func run(endpoints []string, n int, nsPrefix, semPrefix string, minSems int, duration, wait time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), wait+duration+10*time.Second)
	defer cancel()
	cli, err := client.New(ctx, client.Config{Endpoints: endpoints})
	if err != nil {
		return err
	}
	defer cli.Close()
	since := time.Now().UnixNano()
	ns, sems, err := find(ctx, cli, since, nsPrefix, semPrefix, minSems, wait)
	if err != nil {
		return err
	}
	var msgs, opened atomic.Int64
	wctx, wcancel := context.WithTimeout(ctx, duration)
	defer wcancel()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(sem string) {
			defer wg.Done()
			first := true
			for u := range cli.Watch(wctx, ns, sem) {
				if u.Err != nil {
					// NotFound: the bench run ended and deleted its namespace.
					if wctx.Err() == nil && status.Code(u.Err) != codes.NotFound {
						errs <- fmt.Errorf("%s: %w", sem, u.Err)
					}
					return
				}
				if first {
					opened.Add(1)
					first = false
				}
				msgs.Add(1)
			}
		}(sems[i%len(sems)])
	}
	start := time.Now()
	wg.Wait()
	close(errs)
	for err := range errs {
		return err
	}
	el := time.Since(start)
	fmt.Printf("watchload: %d streams on %d semaphores of %s: %d messages in %v (%.0f/s)\n",
		opened.Load(), len(sems), ns, msgs.Load(), el.Round(time.Millisecond), float64(msgs.Load())/el.Seconds())
	return nil
}

// find waits for the newest namespace with nsPrefix created after since,
// and for at least minSems of its semaphores with semPrefix.
func find(ctx context.Context, cli *client.Client, since int64, nsPrefix, semPrefix string, minSems int, wait time.Duration) (string, []string, error) {
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		nsl, err := cli.ListNamespaces(ctx, &pb.ListNamespacesRequest{Limit: 250})
		if err != nil {
			return "", nil, err
		}
		var best *pb.Namespace
		for _, n := range nsl.Namespaces {
			if strings.HasPrefix(n.Name, nsPrefix) && n.CreatedAt >= since && (best == nil || n.CreatedAt > best.CreatedAt) {
				best = n
			}
		}
		if best != nil {
			sl, err := cli.ListSemaphores(ctx, &pb.ListSemaphoresRequest{NamespaceName: best.Name, Limit: 250})
			if err == nil {
				var sems []string
				for _, s := range sl.Semaphores {
					if strings.HasPrefix(s.Name, semPrefix) {
						sems = append(sems, s.Name)
					}
				}
				if len(sems) >= minSems {
					sort.Strings(sems)
					return best.Name, sems, nil
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return "", nil, fmt.Errorf("no namespace %s* with %d semaphores %s* within %v", nsPrefix, minSems, semPrefix, wait)
}
