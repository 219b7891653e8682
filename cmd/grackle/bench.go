package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	"github.com/grackle-coord/grackle/bench"
	"github.com/grackle-coord/grackle/bench/idleconns"
	"github.com/grackle-coord/grackle/internal/mux"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// benchCmd: the load generator behind docs/PERFORMANCE.md. The workloads
// and their output live in bench/, which also drives the etcd recipe of
// bench/etcd, so both print the same results.
func (a *app) benchCmd() *cobra.Command {
	g := a.group("bench", "Measure a running cluster: pairs, handoff, leases, reads, expiry, locks, lockhandoff, waitgroup, barrier (see docs/PERFORMANCE.md)")
	o := bench.Options{Target: "grackle"}
	o.Register(g.PersistentFlags())
	var spread bool
	var unary bool
	g.PersistentFlags().BoolVar(&spread, "spread", false,
		"spread the workers over every endpoint (followers forward to the leader); default: all to the leader")
	g.PersistentFlags().BoolVar(&unary, "unary", false,
		"send every call as its own unary gRPC call; default: over each connection's multiplexed stream, as the Go client does")

	runner := func(workloads func([]string) ([]string, error)) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, args []string) error {
			ws, err := workloads(args)
			if err != nil {
				return usagef("%v", err)
			}
			switch a.output {
			case "table":
				o.Format = "text"
			case "json":
				o.Format = "json"
			default:
				return flagError(cmd, flagOutput, "bench prints table (RESULT lines) or json")
			}
			if err := o.Validate(); err != nil {
				return usagef("%v", err)
			}
			if isTerminal(a.stderr) {
				o.Progress = a.stderr
			}
			b, closeAll, err := a.grackleBackend(cmd.Context(), spread, o.Conns, unary)
			if err != nil {
				return err
			}
			defer closeAll()
			if err := bench.RunAll(cmd.Context(), b, o, ws, a.stdout); err != nil {
				if cmd.Context().Err() != nil {
					return callError(cmd.Context(), err)
				}
				return &exitError{code: exitCallFailed, msg: oneLine("bench: " + err.Error())}
			}
			return nil
		}
	}
	short := map[string]string{
		"pairs":       "Uncontended: each worker its own lease and semaphore, acquire weight 1 then release",
		"handoff":     "Contended: one semaphore of --permits 1, workers acquire, hold --hold, release (FIFO hand-off)",
		"leases":      "Lease churn: create a lease, then revoke it",
		"reads":       "Linearizable GetSemaphore, each worker on its own semaphore",
		"expiry":      "Expiry lateness: holders whose lease expires while a waiter waits",
		"locks":       "Uncontended locks: each worker its own lock lease and exclusive lock, acquire then release",
		"lockhandoff": "Contended lock: one exclusive lock, workers acquire, hold --hold, release (FIFO hand-off)",
		"waitgroup":   "Wait groups: each worker completes its group of --group-jobs jobs in calls of --batch, a waiter waits for it",
		"barrier":     "Barrier rounds: the workers meet at one barrier of as many processes; trip latency to the last woken",
	}
	for _, w := range bench.Workloads {
		g.AddCommand(&cobra.Command{
			Use:   w,
			Short: short[w],
			Args:  positional(),
			RunE:  runner(func([]string) ([]string, error) { return []string{w}, nil }),
		})
	}
	g.AddCommand(&cobra.Command{
		Use:   "all [WORKLOADS]",
		Short: "Run several workloads in turn: a comma-separated list, or every one (run 1 of each, then run 2...)",
		Args:  cobra.MaximumNArgs(1),
		RunE: runner(func(args []string) ([]string, error) {
			if len(args) == 0 {
				return bench.Workloads, nil
			}
			return bench.ParseWorkloads(args[0])
		}),
	})

	var base, subject string
	table := &cobra.Command{
		Use:   "table FILE...",
		Short: "Print JSON results (-o json, of any target) as one Markdown table with throughput ratios",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			all, err := readResultFiles(args, bench.ReadResults)
			if err != nil {
				return err
			}
			if subject != "" {
				err = bench.TableOf(a.stdout, all, subject)
			} else {
				err = bench.Table(a.stdout, all, base)
			}
			if err != nil {
				return &exitError{code: exitCallFailed, msg: oneLine(err.Error())}
			}
			return nil
		},
	}
	table.Flags().StringVar(&base, "base", "", "target the ratios divide by (default: the last target)")
	table.Flags().StringVar(&subject, "subject", "", "instead of --base: the ratios are this target over each other one (make compare-bench: grackle)")
	table.MarkFlagsMutuallyExclusive("base", "subject")
	g.AddCommand(table)
	g.AddCommand(a.idleConnsCmd(&o, &unary))
	return g
}

// idleConnsCmd: grackle bench idle-conns, what an idle client connection
// costs a member (bench/idleconns; make idle-bench runs it).
func (a *app) idleConnsCmd(o *bench.Options, unary *bool) *cobra.Command {
	opt := idleconns.Options{Member: "leader", Settle: 2 * time.Second}
	cmd := &cobra.Command{
		Use:   "idle-conns",
		Short: "Memory per idle client connection on a member: open --conns connections to the leader or a follower, read its RSS, heap and goroutines before and after",
		Long: `Opens --conns (default 1000) gRPC connections to one member, the leader or a
follower (--member), with one call answered on each: on the connection's
multiplexed stream as the Go client does, or with --unary as a unary call.
It reads the member's resident memory (/proc/PID/status, so the member runs
on this machine: --server-pids), and its Go heap in use and goroutines
(its /metrics: --http-endpoints) before and after, each after a garbage
collection when the member serves its profiles (--pprof), and prints the
differences per connection. --server-pids and --http-endpoints name the
members in the order of --endpoints. The member must admit the connections:
--max-connections and --max-connections-per-address.`,
		Args: positional(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			opt.Endpoints = a.endpoints
			opt.PIDs = o.ServerPIDs
			opt.Conns = o.Conns
			if !cmd.Flags().Changed("conns") {
				opt.Conns = 1000
			}
			opt.Unary = *unary
			opt.Label = o.Target
			opt.DialOptions = a.dialOptions(nil)
			if isTerminal(a.stderr) {
				opt.Progress = a.stderr
			}
			if a.output != "table" && a.output != "json" {
				return flagError(cmd, flagOutput, "bench idle-conns prints table (a RESULT line) or json")
			}
			if err := opt.Validate(); err != nil {
				return usagef("%v", err)
			}
			res, err := idleconns.Run(cmd.Context(), opt)
			if err != nil {
				if cmd.Context().Err() != nil {
					return callError(cmd.Context(), err)
				}
				return &exitError{code: exitCallFailed, msg: oneLine(err.Error())}
			}
			if a.output == "json" {
				b, _ := json.Marshal(res)
				fmt.Fprintln(a.stdout, string(b))
			} else {
				fmt.Fprintln(a.stdout, res.Text())
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&opt.Member, "member", opt.Member, "whom the connections go to: leader or follower")
	fs.StringSliceVar(&opt.HTTP, "http-endpoints", nil, "the members' HTTP addresses (host:port, for /metrics and /debug/pprof/heap), in the order of --endpoints")
	fs.DurationVar(&opt.Settle, "settle", opt.Settle, "wait before each reading")
	fs.StringVar(&opt.HeapProfile, "heap-profile", "", "write the member's heap profile, taken with the connections open, to this file (the member serves --pprof)")
	fs.IntVar(&opt.Parallel, "parallel", 32, "connections being opened at once")

	tbl := &cobra.Command{
		Use:   "table FILE...",
		Short: "Print idle-conns JSON results (-o json) as one Markdown table: medians per connection",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			all, err := readResultFiles(args, idleconns.ReadResults)
			if err != nil {
				return err
			}
			if err := idleconns.Table(a.stdout, all); err != nil {
				return &exitError{code: exitCallFailed, msg: oneLine(err.Error())}
			}
			return nil
		},
	}
	cmd.AddCommand(tbl)
	return cmd
}

// isTerminal reports whether w is a terminal (the progress line is for
// people, not for files and pipes).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// grackleBackend connects to the leader (asked of the first reachable
// endpoint), or with spread to every endpoint in turn: conns connections
// in all (at least one per endpoint used), as conns worker processes
// would hold them.
func (a *app) grackleBackend(ctx context.Context, spread bool, conns int, unary bool) (*bench.Grackle, func(), error) {
	first, _, err := dialFirst(ctx, a.endpoints, connectTimeout, a)
	if err != nil {
		return nil, nil, callError(ctx, err)
	}
	st, err := pb.NewClusterServiceClient(first).GetClusterStatus(ctx, &pb.GetClusterStatusRequest{})
	first.Close()
	if err != nil {
		return nil, nil, callError(ctx, err)
	}
	if st.LeaderAddress == "" {
		return nil, nil, &exitError{code: exitCallFailed, msg: "no leader known"}
	}
	targets := []string{st.LeaderAddress}
	if spread {
		targets = a.endpoints
	}
	var all []*grpc.ClientConn
	var muxes []*mux.Conn
	closeAll := func() {
		for _, m := range muxes {
			m.Close()
		}
		for _, c := range all {
			c.Close()
		}
	}
	dial := func(t string) (*grpc.ClientConn, error) {
		c, err := grpc.NewClient(t, a.dialOptions(nil)...) // --cacert/--cert/--key, --token
		if err != nil {
			closeAll()
			return nil, &exitError{code: exitCallFailed, msg: oneLine(fmt.Sprintf("%s: %v", t, err))}
		}
		all = append(all, c)
		return c, nil
	}
	leader, err := dial(st.LeaderAddress)
	if err != nil {
		return nil, nil, err
	}
	var work []grpc.ClientConnInterface
	for i := 0; i < max(conns, len(targets)); i++ {
		c, err := dial(targets[i%len(targets)])
		if err != nil {
			return nil, nil, err
		}
		if unary {
			work = append(work, c)
			continue
		}
		m := mux.NewConn(c)
		muxes = append(muxes, m)
		work = append(work, m)
	}
	return bench.NewGrackle(work, leader), closeAll, nil
}

// readResultFiles reads every file of JSON results (-o json) with read.
func readResultFiles[R any](paths []string, read func(io.Reader) ([]R, error)) ([]R, error) {
	var all []R
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return nil, &exitError{code: exitCallFailed, msg: oneLine(err.Error())}
		}
		rs, err := read(f)
		f.Close()
		if err != nil {
			return nil, &exitError{code: exitCallFailed, msg: oneLine(p + ": " + err.Error())}
		}
		all = append(all, rs...)
	}
	return all, nil
}
