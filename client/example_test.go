package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/grackle-coord/grackle/client"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
	"github.com/grackle-coord/grackle/server"
)

// startExampleServer starts an in-process single-node Grackle server and
// returns its gRPC address and a function that stops it. (In real use the
// server runs elsewhere: `grackle server`.)
func startExampleServer() (addr string, stop func()) {
	dir, err := os.MkdirTemp("", "grackle-example-")
	if err != nil {
		log.Fatal(err)
	}
	cfg := server.DefaultConfig()
	cfg.DataDir = dir
	cfg.GRPCAddr = "127.0.0.1:0"
	cfg.RaftAddr = "127.0.0.1:0"
	cfg.HTTPAddr = ""
	cfg.LogLevel = "error"
	s, err := server.Start(cfg, hclog.NewNullLogger())
	if err != nil {
		log.Fatal(err)
	}
	return s.GRPCAddr(), func() {
		s.Close()
		os.RemoveAll(dir)
	}
}

// createSemaphore is one-time setup: a namespace and a semaphore.
func createSemaphore(ctx context.Context, cli *client.Client, ns, sem string, permits int64) {
	if _, err := cli.CreateNamespace(ctx, &pb.CreateNamespaceRequest{Name: ns}); err != nil {
		log.Fatal(err)
	}
	if _, err := cli.CreateSemaphore(ctx, &pb.CreateSemaphoreRequest{NamespaceName: ns, SemaphoreName: sem, Permits: permits}); err != nil {
		log.Fatal(err)
	}
}

// The happy path: connect, open a session (a lease kept alive in the
// background), acquire permits, release them, close the session.
func Example() {
	addr, stop := startExampleServer()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	cli, err := client.New(ctx, client.Config{Endpoints: []string{addr}})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	createSemaphore(ctx, cli, "jobs", "db", 3)

	sess, err := cli.NewSession(ctx, "jobs", "worker-1", 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	grant, err := sess.Semaphore("db").Acquire(ctx, 2)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("acquired", grant.Weight, "permits; fencing token issued:", grant.FencingToken > 0)
	if err := sess.Semaphore("db").Release(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("released")
	if err := sess.Close(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("session closed:", errors.Is(sess.Err(), client.ErrSessionClosed))
	// Output:
	// acquired 2 permits; fencing token issued: true
	// released
	// session closed: true
}

// WithPermits runs a function while holding permits and releases them
// however the function ends, also when it fails or panics.
func ExampleWithPermits() {
	addr, stop := startExampleServer()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	cli, err := client.New(ctx, client.Config{Endpoints: []string{addr}})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	createSemaphore(ctx, cli, "jobs", "api", 5)
	sess, err := cli.NewSession(ctx, "jobs", "worker-2", 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	defer sess.Close(ctx)
	api := sess.Semaphore("api")

	err = client.WithPermits(ctx, api, 3, func(ctx context.Context, g *client.Grant) error {
		// ctx is cancelled if the session's lease is lost: stop then.
		fmt.Println("running with", g.Weight, "permits")
		return nil
	})
	fmt.Println("result:", err)

	err = client.WithPermits(ctx, api, 1, func(ctx context.Context, g *client.Grant) error {
		return errors.New("upstream said no")
	})
	fmt.Println("result:", err)

	st, err := cli.GetSemaphore(ctx, &pb.GetSemaphoreRequest{NamespaceName: "jobs", SemaphoreName: "api"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("held afterwards:", st.Semaphore.ActiveHolds)
	// Output:
	// running with 3 permits
	// result: <nil>
	// result: upstream said no
	// held afterwards: 0
}

// TryAcquire never waits: it fails with ErrWouldBlock when the permits are
// not free at once; Acquire with a deadline fails with ErrTimeout.
func ExampleSemaphore_TryAcquire() {
	addr, stop := startExampleServer()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	cli, err := client.New(ctx, client.Config{Endpoints: []string{addr}})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	createSemaphore(ctx, cli, "jobs", "gpu", 1)
	a, err := cli.NewSession(ctx, "jobs", "a", 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close(ctx)
	b, err := cli.NewSession(ctx, "jobs", "b", 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close(ctx)

	if _, err := a.Semaphore("gpu").TryAcquire(ctx, 1); err != nil {
		log.Fatal(err)
	}
	_, err = b.Semaphore("gpu").TryAcquire(ctx, 1)
	fmt.Println("b, try:", errors.Is(err, client.ErrWouldBlock))

	short, cancelShort := context.WithTimeout(ctx, time.Second)
	defer cancelShort()
	_, err = b.Semaphore("gpu").Acquire(short, 1)
	fmt.Println("b, wait 1s:", errors.Is(err, client.ErrTimeout))
	// Output:
	// b, try: true
	// b, wait 1s: true
}

// Locks are held under a lock session (a lock lease kept alive in the
// background). A lock on "orders" covers "orders/eu": while one lease
// holds it exclusively, another cannot take "orders/eu", and the error
// says why. WithLock runs a function holding a lock and releases it
// however the function ends.
func ExampleWithLock() {
	addr, stop := startExampleServer()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	cli, err := client.New(ctx, client.Config{Endpoints: []string{addr}})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.CreateNamespace(ctx, &pb.CreateNamespaceRequest{Name: "shop"}); err != nil {
		log.Fatal(err)
	}
	a, err := cli.NewLockSession(ctx, "shop", "billing-1", 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close(ctx)
	b, err := cli.NewLockSession(ctx, "shop", "report-1", 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close(ctx)

	err = client.WithLock(ctx, a.Lock("orders"), client.Exclusive, func(ctx context.Context, g *client.LockGrant) error {
		// Pass g.FencingToken to the resource, so that it can refuse
		// writes from a holder whose lock has since moved on.
		fmt.Println("holding", g.Lock, g.Mode, "; fencing token issued:", g.FencingToken > 0)
		_, err := b.Lock("orders/eu").TryAcquire(ctx, client.Shared)
		var le *client.LockAcquireError
		if errors.As(err, &le) {
			fmt.Println("orders/eu:", errors.Is(err, client.ErrWouldBlock), le.Reason, le.BlockingLocks)
		}
		return nil
	})
	fmt.Println("result:", err)

	g, err := b.Lock("orders/eu").TryAcquire(ctx, client.Shared)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("then", g.Lock, g.Mode)
	// Output:
	// holding orders exclusive ; fencing token issued: true
	// orders/eu: true CONTENTION_REASON_ANCESTOR [orders]
	// result: <nil>
	// then orders/eu shared
}

// A batch of jobs with a wait group: the coordinator creates the group
// with the number of jobs and waits; workers mark their jobs done, in
// batches of any size (completing a job twice counts once, so a worker
// may safely retry). Wait returns when the last job is done.
func ExampleWaitGroup() {
	addr, stop := startExampleServer()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	cli, err := client.New(ctx, client.Config{Endpoints: []string{addr}})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.CreateNamespace(ctx, &pb.CreateNamespaceRequest{Name: "batch"}); err != nil {
		log.Fatal(err)
	}
	if _, err := cli.CreateWaitGroup(ctx, &pb.CreateWaitGroupRequest{NamespaceName: "batch", WaitGroupName: "nightly",
		Counter: 300, ExpiresAt: time.Now().Add(6 * time.Hour).UnixNano()}); err != nil {
		log.Fatal(err)
	}
	wg := cli.WaitGroup("batch", "nightly")

	// Three workers, 100 jobs each.
	for w := range 3 {
		go func() {
			var done []string
			for j := range 100 {
				done = append(done, fmt.Sprintf("job-%d-%03d", w, j))
			}
			if _, err := wg.Complete(ctx, done...); err != nil {
				log.Print(err)
			}
		}()
	}

	g, outcome, err := wg.Wait(ctx)
	if errors.Is(err, client.ErrWaitGroupExpired) {
		fmt.Println("the batch did not finish in time")
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(outcome, g.CompletedJobs, "of", g.Counter)

	// A retried completion counts nothing twice.
	c, err := wg.Complete(ctx, "job-0-000")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("newly completed by the retry:", c.NewlyCompleted)
	// Output:
	// WAIT_GROUP_WAIT_OUTCOME_COMPLETED 300 of 300
	// newly completed by the retry: 0
}

// A phased job with a barrier: each of 3 shards finishes phase 1, then
// waits at the barrier until all have; ArriveAndWait returns the
// generation passed (1 after phase 1, 2 after phase 2). The barrier is
// reusable: the next phase meets at the next generation.
func ExampleBarrier_ArriveAndWait() {
	addr, stop := startExampleServer()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	cli, err := client.New(ctx, client.Config{Endpoints: []string{addr}})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.CreateNamespace(ctx, &pb.CreateNamespaceRequest{Name: "etl"}); err != nil {
		log.Fatal(err)
	}
	if _, err := cli.CreateBarrier(ctx, &pb.CreateBarrierRequest{NamespaceName: "etl", BarrierName: "phase-done", ExpectedProcesses: 3}); err != nil {
		log.Fatal(err)
	}
	b := cli.Barrier("etl", "phase-done")

	var mu sync.Mutex
	passed := map[int64]int{} // generation -> shards that passed it
	var shards sync.WaitGroup
	for s := range 3 {
		shards.Add(1)
		go func() {
			defer shards.Done()
			// The process ID must be stable across retries: it is what
			// makes an arrival count once.
			id := fmt.Sprintf("shard-%d", s)
			for phase := 1; phase <= 2; phase++ {
				// ... the shard's work of this phase ...
				gen, err := b.ArriveAndWait(ctx, id)
				if err != nil {
					log.Fatal(err)
				}
				mu.Lock()
				passed[gen]++
				mu.Unlock()
			}
		}()
	}
	shards.Wait()
	fmt.Println("generation 1 passed by", passed[1], "shards; generation 2 by", passed[2])
	st, err := b.Get(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("now at generation", st.Generation)
	// Output:
	// generation 1 passed by 3 shards; generation 2 by 3
	// now at generation 3
}
