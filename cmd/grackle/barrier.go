package main

// `grackle barrier ...`: barriers (create, get, list, update, delete),
// arrivals (arrive, arrive --wait, participants) and the wait for a
// generation's trip (wait).

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	"github.com/grackle-coord/grackle/apierr"
	"github.com/grackle-coord/grackle/client"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

func (a *app) barrierCmd() *cobra.Command {
	cmd := a.group("barrier", "Let processes meet: arrive, and wait until all have (barriers)")
	cmd.Long = `A barrier lets --expected-processes processes meet: each arrives, and the
last arrival trips it; everyone waiting for that generation is released,
and the barrier starts its next generation (it is reusable, like a cyclic
barrier). An arrival counts once per (generation, process ID), so a retried
arrival never counts twice. "grackle barrier arrive --wait" arrives and
waits, in one line of a shell script.`
	cmd.AddCommand(
		a.barrierCreateCmd(),
		a.barrierGetCmd(),
		a.barrierListCmd(),
		a.barrierUpdateCmd(),
		a.barrierDeleteCmd(),
		a.barrierArriveCmd(),
		a.barrierWaitCmd(),
		a.barrierParticipantsCmd(),
	)
	return cmd
}

// checkGeneration checks --generation when given: at least 1 (min 0 for
// participants, where 0 is the current one).
func checkGeneration(cmd *cobra.Command, gen, min int64) error {
	if changed(cmd, "generation") && gen < min {
		return flagError(cmd, "generation", "must be at least %d", min)
	}
	return nil
}

func (a *app) barrierCreateCmd() *cobra.Command {
	var (
		desc     string
		expected int64
		inactive time.Duration
		md       []string
	)
	cmd := &cobra.Command{
		Use:   "create NAMESPACE BARRIER --expected-processes N",
		Short: "Create a barrier that trips when --expected-processes processes have arrived",
		Long: `Create a barrier that trips when --expected-processes distinct processes
have arrived; its generation starts at 1. --delete-inactive-after deletes
it after that long without an arrival (0, the default: never; at most 720h).`,
		Example: "  grackle barrier create etl phase-done --expected-processes 8 --delete-inactive-after 24h",
		Args:    positional("NAMESPACE", "BARRIER"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkAtLeastOne(cmd, "expected-processes", expected, true, "how many processes trip the barrier"); err != nil {
				return err
			}
			secs, err := keepSeconds(cmd, "delete-inactive-after", inactive)
			if err != nil {
				return err
			}
			meta, err := parseMetadata(md)
			if err != nil {
				return err
			}
			resp, err := call(a, cmd, 0, func(ctx context.Context, c clients) (*pb.CreateBarrierResponse, error) {
				return c.api.CreateBarrier(ctx, &pb.CreateBarrierRequest{
					NamespaceName: args[0], BarrierName: args[1], Description: desc, ExpectedProcesses: expected,
					DeleteInactiveAfterSeconds: secs, Metadata: meta,
				})
			})
			if err != nil {
				return err
			}
			return a.show(barrierView(resp, resp.GetBarrier()))
		},
	}
	cmd.Flags().Int64Var(&expected, "expected-processes", 0, "how many distinct processes trip the barrier (required, at least 1)")
	cmd.Flags().StringVar(&desc, "description", "", "free text, at most 1024 bytes")
	durationVar(cmd.Flags(), &inactive, "delete-inactive-after", 0, "delete the barrier after this long without an arrival (0: never; at most 720h)")
	metadataFlag(cmd.Flags(), &md, "barrier")
	return cmd
}

func (a *app) barrierGetCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "get NAMESPACE BARRIER",
		Short: "Show a barrier: generation, arrivals of expected",
		Args:  positional("NAMESPACE", "BARRIER"),
		RunE: func(cmd *cobra.Command, args []string) error {
			resp, err := call(a, cmd, 0, func(ctx context.Context, c clients) (*pb.GetBarrierResponse, error) {
				return c.api.GetBarrier(ctx, &pb.GetBarrierRequest{NamespaceName: args[0], BarrierName: args[1]})
			})
			if err != nil {
				return err
			}
			return a.show(barrierView(resp, resp.GetBarrier()))
		},
	}
}

func (a *app) barrierListCmd() *cobra.Command {
	var lf listFlags
	cmd := &cobra.Command{
		Use:   "list NAMESPACE",
		Short: "List the barriers of a namespace, ordered by name",
		Args:  positional("NAMESPACE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := lf.check(cmd); err != nil {
				return err
			}
			resp, err := call(a, cmd, 0, func(ctx context.Context, c clients) (*pb.ListBarriersResponse, error) {
				return c.api.ListBarriers(ctx, &pb.ListBarriersRequest{NamespaceName: args[0], Limit: lf.limit, PaginationToken: lf.token})
			})
			if err != nil {
				return err
			}
			return a.show(barriersView(resp))
		},
	}
	lf.register(cmd.Flags())
	return cmd
}

func (a *app) barrierUpdateCmd() *cobra.Command {
	var (
		desc      string
		expected  int64
		inactive  time.Duration
		md        []string
		clearMeta bool
		version   int64
	)
	cmd := &cobra.Command{
		Use:   "update NAMESPACE BARRIER",
		Short: "Change a barrier's expected processes, deletion delay, description or metadata",
		Long: `Change a barrier's expected processes, deletion delay, description or
metadata. --expected-processes below the arrivals of the current generation
fails with FailedPrecondition; equal to them, the barrier trips in this
update (its waiters are released and the next generation begins).

The API replaces every mutable field, so the fields not given here are
read from the barrier just before and sent back unchanged. Without
--expected-version the version read then is sent as expected_version: a
concurrent change still makes the update fail with "version mismatch"
instead of being overwritten.`,
		Example: "  grackle barrier update etl phase-done --expected-processes 7   # one shard was dropped",
		Args:    positional("NAMESPACE", "BARRIER"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !changed(cmd, "expected-processes", "description", "delete-inactive-after", "metadata") && !clearMeta {
				return usagef("nothing to update: give --expected-processes, --delete-inactive-after, --description, --metadata or --clear-metadata")
			}
			if err := checkAtLeastOne(cmd, "expected-processes", expected, false, ""); err != nil {
				return err
			}
			secs, err := keepSeconds(cmd, "delete-inactive-after", inactive)
			if err != nil {
				return err
			}
			if err := checkMetadataReplace(cmd, clearMeta); err != nil {
				return err
			}
			if err := checkExpectedVersion(cmd, version); err != nil {
				return err
			}
			meta, err := parseMetadata(md)
			if err != nil {
				return err
			}
			req := &pb.UpdateBarrierRequest{
				NamespaceName: args[0], BarrierName: args[1], Description: desc, ExpectedProcesses: expected,
				DeleteInactiveAfterSeconds: secs, Metadata: meta, ExpectedVersion: version,
			}
			keepMeta := !changed(cmd, "metadata") && !clearMeta
			resp, err := call(a, cmd, 0, func(ctx context.Context, c clients) (*pb.UpdateBarrierResponse, error) {
				cur, err := c.api.GetBarrier(ctx, &pb.GetBarrierRequest{NamespaceName: args[0], BarrierName: args[1]})
				if err != nil {
					return nil, err
				}
				b := cur.GetBarrier()
				if !changed(cmd, "description") {
					req.Description = b.GetDescription()
				}
				if !changed(cmd, "expected-processes") {
					req.ExpectedProcesses = b.GetExpectedProcesses()
				}
				if !changed(cmd, "delete-inactive-after") {
					req.DeleteInactiveAfterSeconds = b.GetDeleteInactiveAfterSeconds()
				}
				if keepMeta {
					req.Metadata = b.GetMetadata()
				}
				if version == 0 {
					req.ExpectedVersion = b.GetVersion()
				}
				return c.api.UpdateBarrier(ctx, req)
			})
			if err != nil {
				return err
			}
			v := barrierView(resp, resp.GetBarrier())
			if resp.GetTripped() {
				v.done = fmt.Sprintf("barrier %q tripped by this update: generation %d passed, now at %d", args[1],
					resp.GetBarrier().GetGeneration()-1, resp.GetBarrier().GetGeneration())
			}
			return a.show(v)
		},
	}
	cmd.Flags().Int64Var(&expected, "expected-processes", 0, "new number of processes that trip the barrier, not below the arrivals (omitted: unchanged)")
	cmd.Flags().StringVar(&desc, "description", "", "new description (\"\" clears it; omitted: unchanged)")
	durationVar(cmd.Flags(), &inactive, "delete-inactive-after", 0, "delete the barrier after this long without an arrival (0: never; omitted: unchanged)")
	metadataFlag(cmd.Flags(), &md, "new barrier (replaces all of it; omitted: unchanged)")
	cmd.Flags().BoolVar(&clearMeta, "clear-metadata", false, "remove all metadata")
	cmd.Flags().Int64Var(&version, "expected-version", 0, "fail unless the barrier is at this version (default: the version read before the update)")
	return cmd
}

func (a *app) barrierDeleteCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAMESPACE BARRIER",
		Short: "Delete a barrier and its arrivals",
		Long: `Delete a barrier and its arrivals; its waiters end with NotFound. Deleting a
missing barrier is not an error.`,
		Args: positional("NAMESPACE", "BARRIER"),
		RunE: func(cmd *cobra.Command, args []string) error {
			resp, err := call(a, cmd, 0, func(ctx context.Context, c clients) (*pb.DeleteBarrierResponse, error) {
				return c.api.DeleteBarrier(ctx, &pb.DeleteBarrierRequest{NamespaceName: args[0], BarrierName: args[1]})
			})
			if err != nil {
				return err
			}
			what := fmt.Sprintf("barrier %q deleted from namespace %q", args[1], args[0])
			if !resp.GetExisted() {
				what = fmt.Sprintf("barrier %q did not exist in namespace %q", args[1], args[0])
			}
			return a.show(doneView(resp, what))
		},
	}
}

func (a *app) barrierArriveCmd() *cobra.Command {
	var (
		processID string
		gen       int64
		wait      time.Duration
		md        []string
	)
	cmd := &cobra.Command{
		Use:   "arrive NAMESPACE BARRIER --process-id ID [--wait 5m]",
		Short: "Arrive at a barrier (and, with --wait, wait until all have arrived)",
		Long: `Arrive at a barrier as --process-id, at its current generation (or at
--generation). An arrival counts once per (generation, process ID): give a
stable ID (a shard, a host and job), so that running the command again,
after a failure, never counts the process twice. The last arrival trips the
barrier and starts its next generation.

Without --wait it arrives and returns: -o id prints the generation the
arrival counted in. With --wait it then waits, up to --wait (whole seconds,
rounded up), until that generation has tripped, and returns at once when
its own arrival tripped it: -o id prints the generation passed, and -o json
the wait's answer (barrier, outcome). A --wait longer than the server's
maximum (300s) is several calls; a leader change is retried on the new
leader. On a terminal, a status line shows the arrivals of the expected
processes, read once a second (not with --quiet).

When --generation is not given and the barrier trips between reading its
generation and the arrival, the command arrives at the next generation;
an arrival at a generation the barrier is no longer at fails with
FailedPrecondition GENERATION_MISMATCH, naming the current one.

Exit status: 0 arrived (and, with --wait, the generation tripped); 3
TIMED_OUT (--wait passed before the trip; the arrival stays counted); 1 the
call failed (a missing barrier, or one deleted while waited for; a
generation mismatch); 2 bad input; 130 interrupted.`,
		Example: `  # each of 8 shards, at the end of phase 1:
  grackle barrier arrive etl phase-done --process-id "shard-$SHARD" --wait=30m && ./phase2.sh

  gen=$(grackle barrier arrive etl phase-done --process-id shard-3 -o id)
  grackle barrier wait etl phase-done --generation "$gen" --wait 30m`,
		Args: func(cmd *cobra.Command, args []string) error {
			// --wait takes its bound only as --wait=30s (a bare --wait
			// waits 5m), so "--wait 30s" leaves 30s as a third argument.
			if len(args) == 3 && changed(cmd, "wait") {
				if _, err := time.ParseDuration(args[2]); err == nil {
					return usagef("write --wait=%s: --wait alone waits up to %s, and its bound is given with '='", args[2], defaultWait)
				}
			}
			return positional("NAMESPACE", "BARRIER")(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if processID == "" {
				return usagef("--process-id is required (a stable ID of the arriving process, e.g. shard-3)")
			}
			if err := checkGeneration(cmd, gen, 1); err != nil {
				return err
			}
			waiting := changed(cmd, "wait")
			if _, err := wholeSeconds(cmd, "wait", wait, 0); err != nil {
				return err
			}
			meta, err := parseMetadata(md)
			if err != nil {
				return err
			}
			var opts []client.ArriveOption
			if meta != nil {
				opts = append(opts, client.WithArrivalMetadata(meta))
			}
			arr, err := call(a, cmd, 0, func(ctx context.Context, c clients) (*client.Arrival, error) {
				return c.client.Barrier(args[0], args[1]).Arrive(ctx, processID, gen, opts...)
			})
			if err != nil {
				return generationExit(err, args[1], gen)
			}
			if !waiting {
				return a.show(arrivalView(arr))
			}
			if arr.AllArrived {
				// Its own arrival tripped it (or a retry found it tripped).
				return a.show(barrierWaitView(&pb.WaitAtBarrierResponse{Barrier: arr.State, Outcome: pb.BarrierWaitOutcome_BARRIER_WAIT_OUTCOME_TRIPPED}, arr.Generation))
			}
			return a.barrierWait(cmd, args[0], args[1], arr.Generation, wait)
		},
	}
	cmd.Flags().StringVar(&processID, "process-id", "", "who arrives, 1..128 bytes, stable across retries (required)")
	cmd.Flags().Int64Var(&gen, "generation", 0, "arrive at this generation (default: the current one)")
	durationVar(cmd.Flags(), &wait, "wait", 0, "then wait for the generation to trip: --wait alone waits up to 5m, --wait=DURATION that long (not given: do not wait; --wait=0: look once)")
	f := cmd.Flags().Lookup("wait")
	f.DefValue = ""                      // not given means no wait, not --wait 0
	f.NoOptDefVal = defaultWait.String() // `barrier arrive --wait`: one line in a shell script
	metadataFlag(cmd.Flags(), &md, "participant")
	return cmd
}

func (a *app) barrierWaitCmd() *cobra.Command {
	var (
		gen  int64
		wait time.Duration
	)
	cmd := &cobra.Command{
		Use:   "wait NAMESPACE BARRIER [--generation N] [--wait 5m]",
		Short: "Wait until a barrier generation has tripped, up to --wait",
		Long: `Wait until the barrier's generation --generation (default: the current one)
has tripped, for up to --wait (default 5m; whole seconds, rounded up).
--wait 0 looks once. A generation that has tripped already returns at once;
one that has not begun fails with FailedPrecondition GENERATION_MISMATCH.
The wait runs on the leader, woken by the commit of the last arrival; a
--wait longer than the server's maximum (300s) is several calls, and a
leader change is retried on the new leader. On a terminal, a status line
shows the arrivals of the expected processes, read once a second (not with
--quiet). -o id prints the generation waited for.

Exit status: 0 tripped; 3 TIMED_OUT (not tripped within --wait); 1 the
call failed (a missing barrier, or one deleted while waited for; a
generation not begun); 2 bad input; 130 interrupted.`,
		Example: "  grackle barrier wait etl phase-done --generation 3 --wait 30m",
		Args:    positional("NAMESPACE", "BARRIER"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkGeneration(cmd, gen, 1); err != nil {
				return err
			}
			if _, err := wholeSeconds(cmd, "wait", wait, 0); err != nil {
				return err
			}
			if gen == 0 {
				resp, err := call(a, cmd, 0, func(ctx context.Context, c clients) (*pb.GetBarrierResponse, error) {
					return c.api.GetBarrier(ctx, &pb.GetBarrierRequest{NamespaceName: args[0], BarrierName: args[1]})
				})
				if err != nil {
					return err
				}
				gen = resp.GetBarrier().GetGeneration()
			}
			return a.barrierWait(cmd, args[0], args[1], gen, wait)
		},
	}
	cmd.Flags().Int64Var(&gen, "generation", 0, "the generation to wait for (default: the current one)")
	durationVar(cmd.Flags(), &wait, "wait", defaultWait, "how long to wait (0: look once; longer than the server's 300s maximum: several calls)")
	return cmd
}

// barrierWait waits up to wait for generation gen of barrier ns/name to
// trip, shows the answer and returns the exit error of a wait that did
// not see the trip.
func (a *app) barrierWait(cmd *cobra.Command, ns, name string, gen int64, wait time.Duration) error {
	stop, err := a.waitProgress(cmd, fmt.Sprintf("barrier %s/%s generation %d", ns, name, gen), wait,
		func(ctx context.Context, cli *client.Client) string {
			r, err := cli.GetBarrier(ctx, &pb.GetBarrierRequest{NamespaceName: ns, BarrierName: name})
			if err != nil {
				return ""
			}
			return arrivalsText(r.GetBarrier(), gen)
		})
	if err != nil {
		return err
	}
	resp, err := waitLoop(a, cmd, wait, func(ctx context.Context, c clients, secs int64) (*pb.WaitAtBarrierResponse, error) {
		return c.api.WaitAtBarrier(ctx, &pb.WaitAtBarrierRequest{NamespaceName: ns, BarrierName: name, ExpectedGeneration: gen, TimeoutSeconds: secs})
	}, func(r *pb.WaitAtBarrierResponse) bool {
		return r.GetOutcome() == pb.BarrierWaitOutcome_BARRIER_WAIT_OUTCOME_TIMED_OUT
	})
	stop()
	if err != nil {
		return generationExit(err, name, gen)
	}
	if err := a.show(barrierWaitView(resp, gen)); err != nil {
		return err
	}
	switch resp.GetOutcome() {
	case pb.BarrierWaitOutcome_BARRIER_WAIT_OUTCOME_TRIPPED:
		return nil
	case pb.BarrierWaitOutcome_BARRIER_WAIT_OUTCOME_TIMED_OUT:
		within := "yet (--wait 30s waits)"
		if wait > 0 {
			within = "within " + wait.String()
		}
		return &exitError{code: exitNotAcquired, msg: fmt.Sprintf("TIMED_OUT: barrier %q generation %d has not tripped %s (%s)",
			name, gen, within, arrivalsText(resp.GetBarrier(), gen))}
	default:
		return &exitError{code: exitCallFailed, msg: fmt.Sprintf("unexpected outcome %s", resp.GetOutcome())}
	}
}

// generationExit rewrites a generation mismatch (a *client.GenerationError,
// or the server's GENERATION_MISMATCH naming the current generation in its
// metadata) of barrier name at generation gen into one clear line (exit
// 1); other errors pass unchanged.
func generationExit(err error, name string, gen int64) error {
	var ee *exitError
	if !errors.As(err, &ee) || ee.callErr == nil {
		return err
	}
	var ge *client.GenerationError
	if errors.As(ee.callErr, &ge) {
		ee.msg = fmt.Sprintf("GENERATION_MISMATCH: barrier %q is at generation %d, not %d", ge.Barrier, ge.Current, ge.Expected)
	} else if apierr.ReasonOf(ee.callErr) == apierr.GenerationMismatch {
		if cur := apierr.Info(ee.callErr).GetMetadata()[apierr.KeyCurrentGeneration]; cur != "" {
			ee.msg = fmt.Sprintf("GENERATION_MISMATCH: barrier %q is at generation %s, not %d", name, cur, gen)
		}
	}
	return err
}

func (a *app) barrierParticipantsCmd() *cobra.Command {
	var (
		lf  listFlags
		gen int64
	)
	cmd := &cobra.Command{
		Use:   "participants NAMESPACE BARRIER [--generation N]",
		Short: "List the processes arrived at a barrier generation, in arrival order",
		Long: `List the processes arrived at the barrier's generation --generation (default:
the current one), in arrival order. The arrivals of the current and the
previous generation are kept; an older generation fails with
FailedPrecondition GENERATION_MISMATCH.`,
		Example: "  grackle barrier participants etl phase-done --generation 2 -o id",
		Args:    positional("NAMESPACE", "BARRIER"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := lf.check(cmd); err != nil {
				return err
			}
			if err := checkGeneration(cmd, gen, 0); err != nil {
				return err
			}
			resp, err := call(a, cmd, 0, func(ctx context.Context, c clients) (*pb.ListBarrierParticipantsResponse, error) {
				return c.api.ListBarrierParticipants(ctx, &pb.ListBarrierParticipantsRequest{
					NamespaceName: args[0], BarrierName: args[1], Generation: gen, Limit: lf.limit, PaginationToken: lf.token,
				})
			})
			if err != nil {
				return err
			}
			return a.show(participantsView(resp))
		},
	}
	cmd.Flags().Int64Var(&gen, "generation", 0, "the generation (0, the default: the current one; the previous one is kept too)")
	lf.register(cmd.Flags())
	return cmd
}

// ---- output ----

// arrivalsText is "3 of 8 arrived at generation 5", or "generation 5
// tripped" once the barrier is past gen.
func arrivalsText(b *pb.Barrier, gen int64) string {
	if b.GetGeneration() > gen {
		return fmt.Sprintf("generation %d tripped", gen)
	}
	return fmt.Sprintf("%d of %d arrived at generation %d", b.GetArrivedProcesses(), b.GetExpectedProcesses(), b.GetGeneration())
}

func barrierKV(b *pb.Barrier, now time.Time) [][2]string {
	return [][2]string{
		{"Name", b.GetName()},
		{"Description", b.GetDescription()},
		{"Generation", itoa(b.GetGeneration())},
		{"Arrived", fmt.Sprintf("%d of %d", b.GetArrivedProcesses(), b.GetExpectedProcesses())},
		{"Deleted", keepText(b.GetDeleteInactiveAfterSeconds(), "the last activity")},
		{"Metadata", fmtMetadata(b.GetMetadata())},
		{"Version", itoa(b.GetVersion())},
		{"Created", fmtTime(b.GetCreatedAt(), now)},
		{"Updated", fmtTime(b.GetUpdatedAt(), now)},
		{"Last activity", fmtTime(b.GetLastActivityAt(), now)},
	}
}

func barrierView(resp proto.Message, b *pb.Barrier) view {
	return view{
		msg:   resp,
		ids:   []string{b.GetName()},
		table: func(t *tableOut) { t.kv(barrierKV(b, t.now)...) },
	}
}

// arrivalView shows an arrival: the generation it counted in, whether
// that generation has tripped, and the barrier. -o json is the
// ArriveAtBarrierResponse.
func arrivalView(arr *client.Arrival) view {
	resp := &pb.ArriveAtBarrierResponse{Barrier: arr.State, AllArrived: arr.AllArrived}
	return view{
		msg: resp,
		ids: []string{strconv.FormatInt(arr.Generation, 10)},
		table: func(t *tableOut) {
			tripped := "no"
			if arr.AllArrived {
				tripped = "yes: generation " + itoa(arr.Generation) + " tripped"
			}
			rows := [][2]string{{"Arrived at generation", itoa(arr.Generation)}, {"All arrived", tripped}}
			if arr.State != nil {
				rows = append(rows, barrierKV(arr.State, t.now)...)
			}
			t.kv(rows...)
		},
	}
}

// barrierWaitView shows the end of a wait for generation gen; -o id
// prints gen.
func barrierWaitView(r *pb.WaitAtBarrierResponse, gen int64) view {
	return view{
		msg: r,
		ids: []string{strconv.FormatInt(gen, 10)},
		table: func(t *tableOut) {
			rows := [][2]string{
				{"Outcome", strings.TrimPrefix(r.GetOutcome().String(), "BARRIER_WAIT_OUTCOME_")},
				{"Waited for generation", itoa(gen)},
			}
			if b := r.GetBarrier(); b != nil {
				rows = append(rows, barrierKV(b, t.now)...)
			}
			t.kv(rows...)
		},
	}
}

func barriersView(r *pb.ListBarriersResponse) view {
	return listView(r, r.GetBarriers(), (*pb.Barrier).GetName,
		[]string{"NAME", "GENERATION", "ARRIVED", "EXPECTED", "LAST ACTIVITY", "VERSION", "DESCRIPTION"},
		func(b *pb.Barrier, now time.Time) []string {
			return []string{b.GetName(), itoa(b.GetGeneration()), itoa(b.GetArrivedProcesses()), itoa(b.GetExpectedProcesses()),
				fmtTime(b.GetLastActivityAt(), now), itoa(b.GetVersion()), truncate(b.GetDescription(), 40)}
		})
}

func participantsView(r *pb.ListBarrierParticipantsResponse) view {
	return listView(r, r.GetParticipants(), (*pb.BarrierParticipant).GetProcessId,
		[]string{"PROCESS ID", "GENERATION", "ARRIVED", "METADATA"},
		func(p *pb.BarrierParticipant, now time.Time) []string {
			return []string{p.GetProcessId(), itoa(p.GetGeneration()), fmtTime(p.GetArrivedAt(), now), truncate(fmtMetadata(p.GetMetadata()), 60)}
		})
}
