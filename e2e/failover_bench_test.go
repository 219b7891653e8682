package e2e

import (
	"context"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/grackle-coord/grackle/client"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// BenchmarkFailover measures leader SIGKILL -> first successful write
// through the surviving nodes, over GRACKLE_FAILOVER_TRIALS trials (default
// 10) with the shipped Raft timeouts, and counts elections that happened
// without a kill (false elections) while GRACKLE_FAILOVER_WRITERS writers
// (default 16) load the cluster for 3 s before each kill.
// GRACKLE_FAILOVER_ARGS adds server flags (space separated, e.g.
// "--heartbeat-timeout 500ms") to compare timeouts in one place.
//
//	go test -run '^$' -bench Failover -benchtime 1x ./e2e/
func BenchmarkFailover(b *testing.B) {
	trials := envInt("GRACKLE_FAILOVER_TRIALS", 10)
	writers := envInt("GRACKLE_FAILOVER_WRITERS", 16)
	extra := strings.Fields(os.Getenv("GRACKLE_FAILOVER_ARGS"))
	for n := 0; n < b.N; n++ {
		p := NewCluster(b, 3, extra...)
		p.StartAll()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		li := p.Index(p.WaitLeader(0, 30*time.Second))
		lease := setupB(b, ctx, p)
		// The client library's view of the same failover: one refresh
		// through a client.Client that knew the old leader, started at
		// the kill, ends when its retries find the new leader.
		var eps []string
		for _, nd := range p.Nodes {
			eps = append(eps, nd.GRPC)
		}
		cl, err := client.New(ctx, client.Config{Endpoints: eps})
		if err != nil {
			b.Fatal(err)
		}
		var samples, clientSamples []time.Duration
		falseElections := 0
		for trial := 0; trial < trials; trial++ {
			// A loaded steady state first: writes for 3 s; a term change
			// here is an election nobody asked for.
			t0 := term(ctx, p, li)
			steady(ctx, p, lease, writers, 3*time.Second)
			if li2 := p.Index(p.WaitLeader(li, 30*time.Second)); li2 != li || term(ctx, p, li2) != t0 {
				falseElections++
				li = li2
			}
			var rest []int
			for i := range p.Nodes {
				if i != li {
					rest = append(rest, i)
				}
			}
			a := anyOf(p, rest...)
			if _, err := cl.RefreshSemaphoreLease(ctx, &pb.RefreshSemaphoreLeaseRequest{NamespaceName: "fo", LeaseId: lease, TtlSeconds: 300}); err != nil {
				b.Fatal(err)
			}
			killed := time.Now()
			p.Kill9(li)
			clientDone := make(chan time.Duration, 1)
			go func() {
				_, err := cl.RefreshSemaphoreLease(ctx, &pb.RefreshSemaphoreLeaseRequest{NamespaceName: "fo", LeaseId: lease, TtlSeconds: 300})
				if err != nil {
					b.Errorf("client refresh across the failover: %v", err)
				}
				clientDone <- time.Since(killed)
			}()
			for {
				cctx, cc := context.WithTimeout(ctx, 500*time.Millisecond)
				_, err := pb.NewGrackleServiceClient(a.Conns[a.next%len(a.Conns)]).RefreshSemaphoreLease(cctx,
					&pb.RefreshSemaphoreLeaseRequest{NamespaceName: "fo", LeaseId: lease, TtlSeconds: 300})
				cc()
				if err == nil {
					break
				}
				a.next++
				time.Sleep(5 * time.Millisecond)
			}
			samples = append(samples, time.Since(killed))
			clientSamples = append(clientSamples, <-clientDone)
			p.Start(li)
			li = p.Index(p.WaitLeader(li, 30*time.Second))
		}
		cl.Close()
		cancel()
		show := func(what string, samples []time.Duration) {
			sort.Slice(samples, func(i, j int) bool { return samples[i] < samples[j] })
			var parts []string
			for _, s := range samples {
				parts = append(parts, s.Round(time.Millisecond).String())
			}
			b.Logf("%s: %s", what, strings.Join(parts, " "))
		}
		show("failover samples (a caller retrying every 5 ms)", samples)
		show("client.Client samples (its own retries and backoff)", clientSamples)
		b.ReportMetric(float64(samples[len(samples)/2].Milliseconds()), "p50-ms")
		b.ReportMetric(float64(samples[len(samples)-1].Milliseconds()), "max-ms")
		b.ReportMetric(float64(clientSamples[len(clientSamples)/2].Milliseconds()), "client-p50-ms")
		b.ReportMetric(float64(clientSamples[len(clientSamples)-1].Milliseconds()), "client-max-ms")
		b.ReportMetric(float64(falseElections), "false-elections")
		b.ReportMetric(float64(trials), "trials")
		p.KillAll()
	}
}

func setupB(b *testing.B, ctx context.Context, p *Proc) string {
	a := anyOf(p)
	var id string
	err := a.Do(ctx, func(ctx context.Context, c pb.GrackleServiceClient) error {
		if _, err := c.CreateNamespace(ctx, &pb.CreateNamespaceRequest{Name: "fo"}); err != nil {
			return err
		}
		l, err := c.CreateSemaphoreLease(ctx, &pb.CreateSemaphoreLeaseRequest{NamespaceName: "fo", ProcessId: "bench", TtlSeconds: 300})
		if err == nil {
			id = l.Lease.LeaseId
		}
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	return id
}

// steady runs `writers` closed-loop writers (lease refreshes, each one
// Raft entry) through every node for d.
func steady(ctx context.Context, p *Proc, lease string, writers int, d time.Duration) {
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := anyOf(p)
			for time.Now().Before(end) && ctx.Err() == nil {
				a.Do(ctx, func(ctx context.Context, c pb.GrackleServiceClient) error {
					_, err := c.RefreshSemaphoreLease(ctx, &pb.RefreshSemaphoreLeaseRequest{NamespaceName: "fo", LeaseId: lease, TtlSeconds: 300})
					return err
				})
			}
		}()
	}
	wg.Wait()
}

func term(ctx context.Context, p *Proc, i int) uint64 {
	st, err := pb.NewClusterServiceClient(p.Dial(i)).GetClusterStatus(ctx, &pb.GetClusterStatusRequest{})
	if err != nil {
		return 0
	}
	return st.Term
}
