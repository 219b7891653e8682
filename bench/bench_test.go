package bench_test

import (
	"context"
	"testing"
	"time"

	"github.com/grackle-coord/grackle/bench"
	"github.com/grackle-coord/grackle/server/servertest"
)

// The bench workloads run end to end and pair every hand-off; timing
// figures come from `grackle bench`, not from this test.
func TestHandoffAndExpiryRun(t *testing.T) {
	c := servertest.Start(t, 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := bench.Handoff(ctx, c.Conn(0), bench.HandoffConfig{Workers: 4, Permits: 1, Hold: time.Millisecond,
		Duration: time.Second, Warmup: 200 * time.Millisecond, TTL: 60, RunID: "t"})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", r)
	if r.Errors != 0 || r.Acquisitions == 0 || r.Handoff.N < r.Acquisitions-1 {
		t.Fatalf("handoff: %+v (last error %v)", r, r.LastError)
	}
	e, err := bench.ExpiryLateness(ctx, c.Conn(0), bench.ExpiryConfig{Trials: 3, TTL: 1, RunID: "t"})
	if err != nil || e.Errors != 0 || e.Lateness.N != 3 {
		t.Fatalf("expiry: %+v %v", e, err)
	}
	t.Logf("%+v", e)
}
