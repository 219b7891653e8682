package promobserver_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/grackle-coord/grackle/client"
	"github.com/grackle-coord/grackle/client/promobserver"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
	"github.com/grackle-coord/grackle/server/servertest"
)

// Against a real node: a grant, a rejected TryAcquire and a weight over
// the permits show up in the registry as the package comment says.
func TestMetricsOfRealAcquires(t *testing.T) {
	c := servertest.Start(t, 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	reg := prometheus.NewPedanticRegistry()
	obs, err := promobserver.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	cli, err := client.New(ctx, client.Config{Endpoints: []string{c.Nodes[0].GRPCAddr()}, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.CreateNamespace(ctx, &pb.CreateNamespaceRequest{Name: "m"}); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.CreateSemaphore(ctx, &pb.CreateSemaphoreRequest{NamespaceName: "m", SemaphoreName: "s", Permits: 1}); err != nil {
		t.Fatal(err)
	}
	a, err := cli.NewSession(ctx, "m", "a", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	b, err := cli.NewSession(ctx, "m", "b", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Semaphore("s").Acquire(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Semaphore("s").TryAcquire(ctx, 1); !errors.Is(err, client.ErrWouldBlock) {
		t.Fatal(err)
	}
	if _, err := b.Semaphore("s").Acquire(ctx, 2); !errors.Is(err, client.ErrWeightExceedsPermits) {
		t.Fatal(err)
	}
	want := `
# HELP grackle_client_acquire_rejected_total Acquires refused without waiting, by reason (unavailable, weight_exceeds_permits).
# TYPE grackle_client_acquire_rejected_total counter
grackle_client_acquire_rejected_total{namespace="m",reason="unavailable",semaphore="s"} 1
grackle_client_acquire_rejected_total{namespace="m",reason="weight_exceeds_permits",semaphore="s"} 1
# HELP grackle_client_acquire_started_total Acquires (Acquire, TryAcquire) begun by this process.
# TYPE grackle_client_acquire_started_total counter
grackle_client_acquire_started_total{namespace="m",semaphore="s"} 3
# HELP grackle_client_acquires_in_flight Acquires under way (waiting included).
# TYPE grackle_client_acquires_in_flight gauge
grackle_client_acquires_in_flight{namespace="m",semaphore="s"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"grackle_client_acquire_rejected_total", "grackle_client_acquire_started_total", "grackle_client_acquires_in_flight"); err != nil {
		t.Fatal(err)
	}
	for result, n := range map[string]int{"acquired": 1, "rejected": 1, "error": 1} {
		if got := histCount(t, reg, result); got != n {
			t.Errorf("duration count for result=%s: %d, want %d", result, got, n)
		}
	}
	a.Close(ctx)
	b.Close(ctx)
}

func histCount(t *testing.T, reg *prometheus.Registry, result string) int {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "grackle_client_acquire_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" && l.GetValue() == result {
					return int(m.GetHistogram().GetSampleCount())
				}
			}
		}
	}
	return 0
}

func TestWithoutSemaphoreLabel(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	obs, err := promobserver.New(reg, promobserver.WithoutSemaphoreLabel())
	if err != nil {
		t.Fatal(err)
	}
	ev := client.AcquireEvent{ID: 1, Namespace: "n", Semaphore: "s", Weight: 1}
	obs.AcquireStart(client.AcquireStartEvent{AcquireEvent: ev})
	obs.AcquireStop(client.AcquireStopEvent{AcquireEvent: ev, Result: client.ResultAcquired, Duration: time.Millisecond})
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP grackle_client_acquire_started_total Acquires (Acquire, TryAcquire) begun by this process.
# TYPE grackle_client_acquire_started_total counter
grackle_client_acquire_started_total{namespace="n"} 1
`), "grackle_client_acquire_started_total"); err != nil {
		t.Fatal(err)
	}
	// Registering twice fails cleanly.
	if _, err := promobserver.New(reg); err == nil {
		t.Fatal("second registration: no error")
	}
}
