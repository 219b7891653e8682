package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/grackle-coord/grackle/bench"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// benchCmd: the load generator behind the figures in the issue notes. It
// prints RESULT lines in the format of shared/peers' tools.
func (a *app) benchCmd() *cobra.Command {
	g := a.group("bench", "Measure a running cluster (RESULT lines like shared/peers)")
	var label string
	g.PersistentFlags().StringVar(&label, "label", "grackle", "target label written into each RESULT line")

	var hc bench.HandoffConfig
	var repeat int
	handoff := &cobra.Command{
		Use:   "handoff",
		Short: "W2: contended hand-off on one semaphore (release acknowledged -> next ACQUIRED)",
		Args:  positional(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if hc.Workers < 1 || hc.Permits < 1 || hc.Duration <= 0 || repeat < 1 {
				return usagef("workers, permits, duration and repeat must be positive")
			}
			conn, err := a.dialLeader(cmd.Context())
			if err != nil {
				return err
			}
			defer conn.Close()
			for run := 1; run <= repeat; run++ {
				hc.RunID = strconv.FormatInt(time.Now().UnixNano(), 36)
				r, err := bench.Handoff(cmd.Context(), conn, hc)
				if err != nil {
					return callError(cmd.Context(), err)
				}
				fmt.Fprintln(a.stdout, bench.ResultLine(label, "W2", fmt.Sprintf("run=%d workers=%d permits=%d hold_ms=%g duration_s=%g acquisitions=%d acq_per_s=%.1f self_handoff_frac=%.3f negative_handoffs=%d commits_per_acq=%.2f errors=%d",
					run, hc.Workers, hc.Permits, float64(hc.Hold)/1e6, hc.Duration.Seconds(), r.Acquisitions, r.AcqPerSecond, r.SelfFraction, r.Negative, r.CommitsPerAcq, r.Errors),
					r.Handoff.Fields("handoff"), r.HandoffOther.Fields("handoff_other"), r.Wait.Fields("acqwait"), r.Release.Fields("rel")))
				if r.LastError != nil {
					fmt.Fprintln(a.stderr, "grackle: bench: last error:", r.LastError)
				}
			}
			return nil
		},
	}
	fs := handoff.Flags()
	fs.IntVar(&hc.Workers, "workers", 8, "concurrent workers, each with its own lease")
	fs.Int64Var(&hc.Permits, "permits", 1, "permits of the semaphore")
	fs.DurationVar(&hc.Hold, "hold", time.Millisecond, "how long a holder keeps the permit")
	fs.DurationVar(&hc.Duration, "duration", 20*time.Second, "measured window")
	fs.DurationVar(&hc.Warmup, "warmup", 2*time.Second, "unmeasured time before the window")
	fs.Int64Var(&hc.TTL, "ttl", 60, "lease TTL in seconds (refreshed at TTL/3)")
	fs.IntVar(&repeat, "repeat", 1, "runs")

	var ec bench.ExpiryConfig
	expiry := &cobra.Command{
		Use:   "expiry",
		Short: "Lease-expiry lateness: holder's expires_at -> the waiter's ACQUIRED",
		Args:  positional(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if ec.Trials < 1 || ec.TTL < 1 {
				return usagef("trials and ttl must be positive")
			}
			conn, err := a.dialLeader(cmd.Context())
			if err != nil {
				return err
			}
			defer conn.Close()
			ec.RunID = strconv.FormatInt(time.Now().UnixNano(), 36)
			r, err := bench.ExpiryLateness(cmd.Context(), conn, ec)
			if err != nil {
				return callError(cmd.Context(), err)
			}
			fmt.Fprintln(a.stdout, bench.ResultLine(label, "expiry", fmt.Sprintf("trials=%d ttl_s=%d errors=%d", ec.Trials, ec.TTL, r.Errors),
				r.Lateness.Fields("lateness")))
			return nil
		},
	}
	expiry.Flags().IntVar(&ec.Trials, "trials", 50, "holders whose lease expires (run concurrently, staggered)")
	expiry.Flags().Int64Var(&ec.TTL, "ttl", 2, "TTL of the expiring leases, seconds")
	g.AddCommand(handoff, expiry)
	return g
}

// dialLeader connects to the leader (asked of the first reachable
// endpoint), so the workload measures the leader path, not forwarding.
func (a *app) dialLeader(ctx context.Context) (*grpc.ClientConn, error) {
	conn, _, err := dialFirst(ctx, a.endpoints, connectTimeout)
	if err != nil {
		return nil, callError(ctx, err)
	}
	st, err := pb.NewClusterServiceClient(conn).GetClusterStatus(ctx, &pb.GetClusterStatusRequest{})
	conn.Close()
	if err != nil {
		return nil, callError(ctx, err)
	}
	if st.LeaderAddress == "" {
		return nil, &exitError{code: exitCallFailed, msg: "no leader known"}
	}
	return grpc.NewClient(st.LeaderAddress, grpc.WithTransportCredentials(insecure.NewCredentials()))
}
