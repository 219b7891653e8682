package main

// `grackle waitgroup ...`: wait groups (create, get, list, update,
// delete), their jobs (complete, jobs) and the wait until all are done
// (wait). Shared with `grackle barrier`: the expiry and duration flags,
// the server-side wait re-issued until --wait has passed, and its status
// line.

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/grackle-coord/grackle/apierr"
	"github.com/grackle-coord/grackle/client"
	"github.com/grackle-coord/grackle/fsm"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

const (
	// maxServerWait is the longest timeout_seconds one wait call asks for
	// (the server's maximum by default); a longer --wait re-issues it.
	maxServerWait = client.DefaultMaxAcquireTimeout
	// defaultWait is --wait of the commands whose purpose is to wait.
	defaultWait = 5 * time.Minute
	// progressEvery is how often a waiting command's status line reads
	// the progress (jobs done, arrivals) for the display.
	progressEvery = time.Second
)

func (a *app) waitGroupCmd() *cobra.Command {
	cmd := a.group("waitgroup", "Count jobs to completion and wait until all are done (wait groups)", "wg")
	cmd.Long = `A wait group counts the distinct jobs that workers complete; anyone can wait
until all --counter of them are done. Completing a job is idempotent per
job ID (a retried completion counts nothing twice). A group whose
--expires-at passes first becomes EXPIRED and never completes. See
"grackle waitgroup wait --help" for the exit codes of a wait.`
	cmd.AddCommand(
		a.waitGroupCreateCmd(),
		a.waitGroupGetCmd(),
		a.waitGroupListCmd(),
		a.waitGroupUpdateCmd(),
		a.waitGroupDeleteCmd(),
		a.waitGroupCompleteCmd(),
		a.waitGroupJobsCmd(),
		a.waitGroupWaitCmd(),
	)
	return cmd
}

// ---- flags ----

// expiryFlags are --expires-at (RFC 3339, or never) and --expires-in (a
// duration from now).
type expiryFlags struct {
	at string
	in time.Duration
}

func (e *expiryFlags) register(fs *pflag.FlagSet, update bool) {
	never := "; never (or 0): no expiry"
	if !update {
		never = " (default: never)"
	}
	fs.StringVar(&e.at, "expires-at", "", "when the group expires unless completed: an RFC 3339 time like 2026-01-02T15:04:05Z"+never)
	durationVar(fs, &e.in, "expires-in", 0, "when the group expires unless completed, as a duration from now by this machine's clock (10m, 2h)")
}

// given reports whether either flag was given.
func (e *expiryFlags) given(cmd *cobra.Command) bool { return changed(cmd, "expires-at", "expires-in") }

// value is expires_at in nanoseconds (0: never) for the flags given.
func (e *expiryFlags) value(cmd *cobra.Command, now time.Time) (int64, error) {
	switch {
	case changed(cmd, "expires-at") && changed(cmd, "expires-in"):
		return 0, usagef("--expires-at and --expires-in exclude each other")
	case changed(cmd, "expires-in"):
		if e.in <= 0 {
			return 0, flagError(cmd, "expires-in", "must be positive")
		}
		return now.Add(e.in).UnixNano(), nil
	case changed(cmd, "expires-at"):
		s := strings.TrimSpace(e.at)
		if s == "never" || s == "0" {
			return 0, nil
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return 0, flagError(cmd, "expires-at", "want an RFC 3339 time like 2026-01-02T15:04:05Z (or never)")
		}
		if !t.After(now) {
			return 0, flagError(cmd, "expires-at", "not in the future (now %s)", now.UTC().Format(time.RFC3339))
		}
		return t.UnixNano(), nil
	}
	return 0, nil
}

// keepSeconds converts a --delete-after-finished or
// --delete-inactive-after duration to the API's whole seconds, 0..30 days.
func keepSeconds(cmd *cobra.Command, flag string, d time.Duration) (int64, error) {
	secs, err := wholeSeconds(cmd, flag, d, 0)
	if err != nil {
		return 0, err
	}
	if secs > fsm.MaxKeepSeconds {
		return 0, flagError(cmd, flag, "at most %s (30 days)", time.Duration(fsm.MaxKeepSeconds)*time.Second)
	}
	return secs, nil
}

// checkAtLeastOne checks a count flag that must be at least 1: given
// (when required) and positive.
func checkAtLeastOne(cmd *cobra.Command, flag string, v int64, required bool, what string) error {
	if !changed(cmd, flag) {
		if required {
			return usagef("--%s is required (%s, at least 1)", flag, what)
		}
		return nil
	}
	if v < 1 {
		return flagError(cmd, flag, "must be at least 1")
	}
	return nil
}

// ---- commands ----

func (a *app) waitGroupCreateCmd() *cobra.Command {
	var (
		desc    string
		counter int64
		exp     expiryFlags
		keep    time.Duration
		md      []string
	)
	cmd := &cobra.Command{
		Use:   "create NAMESPACE WAIT_GROUP --counter N",
		Short: "Create a wait group that completes when --counter distinct jobs are done",
		Long: `Create a wait group that completes when --counter distinct jobs are done.

--expires-at (or --expires-in) sets when an unfinished group becomes
EXPIRED: it then never completes, and its waiters are told so.
--delete-after-finished deletes the group that long after it completed or
expired (0, the default: kept until deleted; at most 720h).`,
		Example: `  grackle waitgroup create batch nightly-2026-01-02 --counter 10000 --expires-in 6h --delete-after-finished 24h
  grackle waitgroup create batch build-42 --counter 3 --expires-at 2026-01-02T06:00:00Z`,
		Args: positional("NAMESPACE", "WAIT_GROUP"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkAtLeastOne(cmd, "counter", counter, true, "the number of jobs that complete the group"); err != nil {
				return err
			}
			expiresAt, err := exp.value(cmd, a.now())
			if err != nil {
				return err
			}
			keepSecs, err := keepSeconds(cmd, "delete-after-finished", keep)
			if err != nil {
				return err
			}
			meta, err := parseMetadata(md)
			if err != nil {
				return err
			}
			resp, err := call(a, cmd, 0, func(ctx context.Context, c clients) (*pb.CreateWaitGroupResponse, error) {
				return c.api.CreateWaitGroup(ctx, &pb.CreateWaitGroupRequest{
					NamespaceName: args[0], WaitGroupName: args[1], Description: desc, Counter: counter,
					ExpiresAt: expiresAt, DeleteAfterFinishedSeconds: keepSecs, Metadata: meta,
				})
			})
			if err != nil {
				return err
			}
			return a.show(waitGroupView(resp, resp.GetWaitGroup()))
		},
	}
	cmd.Flags().Int64Var(&counter, "counter", 0, "how many distinct jobs complete the group (required, at least 1)")
	cmd.Flags().StringVar(&desc, "description", "", "free text, at most 1024 bytes")
	exp.register(cmd.Flags(), false)
	durationVar(cmd.Flags(), &keep, "delete-after-finished", 0, "delete the group this long after it completed or expired (0: keep it until deleted; at most 720h)")
	metadataFlag(cmd.Flags(), &md, "wait group")
	return cmd
}

func (a *app) waitGroupGetCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "get NAMESPACE WAIT_GROUP",
		Short: "Show a wait group: status, jobs done of counter, expiry",
		Args:  positional("NAMESPACE", "WAIT_GROUP"),
		RunE: func(cmd *cobra.Command, args []string) error {
			resp, err := call(a, cmd, 0, func(ctx context.Context, c clients) (*pb.GetWaitGroupResponse, error) {
				return c.api.GetWaitGroup(ctx, &pb.GetWaitGroupRequest{NamespaceName: args[0], WaitGroupName: args[1]})
			})
			if err != nil {
				return err
			}
			return a.show(waitGroupView(resp, resp.GetWaitGroup()))
		},
	}
}

func (a *app) waitGroupListCmd() *cobra.Command {
	var lf listFlags
	cmd := &cobra.Command{
		Use:   "list NAMESPACE",
		Short: "List the wait groups of a namespace, ordered by name",
		Args:  positional("NAMESPACE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := lf.check(cmd); err != nil {
				return err
			}
			resp, err := call(a, cmd, 0, func(ctx context.Context, c clients) (*pb.ListWaitGroupsResponse, error) {
				return c.api.ListWaitGroups(ctx, &pb.ListWaitGroupsRequest{NamespaceName: args[0], Limit: lf.limit, PaginationToken: lf.token})
			})
			if err != nil {
				return err
			}
			return a.show(waitGroupsView(resp))
		},
	}
	lf.register(cmd.Flags())
	return cmd
}

func (a *app) waitGroupUpdateCmd() *cobra.Command {
	var (
		desc      string
		counter   int64
		exp       expiryFlags
		keep      time.Duration
		md        []string
		clearMeta bool
		expected  int64
	)
	cmd := &cobra.Command{
		Use:   "update NAMESPACE WAIT_GROUP",
		Short: "Change an active wait group's counter, expiry, description or metadata",
		Long: `Change an active wait group's counter, expiry, deletion delay, description
or metadata. A group that has completed or expired cannot be changed
(FailedPrecondition).

--counter below the jobs already done fails with FailedPrecondition; equal
to them, the group completes in this update (and its waiters are woken).
--expires-at never removes the expiry.

The API replaces every mutable field, so the fields not given here are
read from the group just before and sent back unchanged. Without
--expected-version the version read then is sent as expected_version: a
concurrent change still makes the update fail with "version mismatch"
instead of being overwritten.`,
		Example: `  grackle waitgroup update batch nightly --counter 9500
  grackle waitgroup update batch nightly --expires-in 2h --expected-version 3`,
		Args: positional("NAMESPACE", "WAIT_GROUP"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !changed(cmd, "counter", "description", "expires-at", "expires-in", "delete-after-finished", "metadata") && !clearMeta {
				return usagef("nothing to update: give --counter, --expires-at, --expires-in, --delete-after-finished, --description, --metadata or --clear-metadata")
			}
			if err := checkAtLeastOne(cmd, "counter", counter, false, ""); err != nil {
				return err
			}
			expiresAt, err := exp.value(cmd, a.now())
			if err != nil {
				return err
			}
			keepSecs, err := keepSeconds(cmd, "delete-after-finished", keep)
			if err != nil {
				return err
			}
			if err := checkMetadataReplace(cmd, clearMeta); err != nil {
				return err
			}
			if err := checkExpectedVersion(cmd, expected); err != nil {
				return err
			}
			meta, err := parseMetadata(md)
			if err != nil {
				return err
			}
			req := &pb.UpdateWaitGroupRequest{
				NamespaceName: args[0], WaitGroupName: args[1], Description: desc, Counter: counter,
				ExpiresAt: expiresAt, DeleteAfterFinishedSeconds: keepSecs, Metadata: meta, ExpectedVersion: expected,
			}
			keepMeta := !changed(cmd, "metadata") && !clearMeta
			resp, err := call(a, cmd, 0, func(ctx context.Context, c clients) (*pb.UpdateWaitGroupResponse, error) {
				cur, err := c.api.GetWaitGroup(ctx, &pb.GetWaitGroupRequest{NamespaceName: args[0], WaitGroupName: args[1]})
				if err != nil {
					return nil, err
				}
				g := cur.GetWaitGroup()
				if !changed(cmd, "description") {
					req.Description = g.GetDescription()
				}
				if !changed(cmd, "counter") {
					req.Counter = g.GetCounter()
				}
				if !exp.given(cmd) {
					req.ExpiresAt = g.GetExpiresAt()
				}
				if !changed(cmd, "delete-after-finished") {
					req.DeleteAfterFinishedSeconds = g.GetDeleteAfterFinishedSeconds()
				}
				if keepMeta {
					req.Metadata = g.GetMetadata()
				}
				if expected == 0 {
					req.ExpectedVersion = g.GetVersion()
				}
				return c.api.UpdateWaitGroup(ctx, req)
			})
			if err != nil {
				return err
			}
			v := waitGroupView(resp, resp.GetWaitGroup())
			if g := resp.GetWaitGroup(); changed(cmd, "counter") && g.GetStatus() == pb.WaitGroupStatus_WAIT_GROUP_STATUS_COMPLETED {
				v.done = fmt.Sprintf("wait group %q completed by this update (%d of %d jobs done)", g.GetName(), g.GetCompletedJobs(), g.GetCounter())
			}
			return a.show(v)
		},
	}
	cmd.Flags().Int64Var(&counter, "counter", 0, "new number of jobs that complete the group, not below the jobs done (omitted: unchanged)")
	cmd.Flags().StringVar(&desc, "description", "", "new description (\"\" clears it; omitted: unchanged)")
	exp.register(cmd.Flags(), true)
	durationVar(cmd.Flags(), &keep, "delete-after-finished", 0, "delete the group this long after it finishes (0: keep it; omitted: unchanged)")
	metadataFlag(cmd.Flags(), &md, "new wait group (replaces all of it; omitted: unchanged)")
	cmd.Flags().BoolVar(&clearMeta, "clear-metadata", false, "remove all metadata")
	cmd.Flags().Int64Var(&expected, "expected-version", 0, "fail unless the group is at this version (default: the version read before the update)")
	return cmd
}

func (a *app) waitGroupDeleteCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAMESPACE WAIT_GROUP",
		Short: "Delete a wait group and its completed jobs",
		Long: `Delete a wait group and its completed jobs; its waiters end with NotFound.
Deleting a missing wait group is not an error.`,
		Args: positional("NAMESPACE", "WAIT_GROUP"),
		RunE: func(cmd *cobra.Command, args []string) error {
			resp, err := call(a, cmd, 0, func(ctx context.Context, c clients) (*pb.DeleteWaitGroupResponse, error) {
				return c.api.DeleteWaitGroup(ctx, &pb.DeleteWaitGroupRequest{NamespaceName: args[0], WaitGroupName: args[1]})
			})
			if err != nil {
				return err
			}
			what := fmt.Sprintf("wait group %q deleted from namespace %q", args[1], args[0])
			if !resp.GetExisted() {
				what = fmt.Sprintf("wait group %q did not exist in namespace %q", args[1], args[0])
			}
			return a.show(doneView(resp, what))
		},
	}
}

func (a *app) waitGroupCompleteCmd() *cobra.Command {
	var (
		file string
		md   []string
	)
	cmd := &cobra.Command{
		Use:   "complete NAMESPACE WAIT_GROUP JOB_ID... [--jobs-file FILE]",
		Short: "Mark jobs of a wait group as done (idempotent per job ID)",
		Long: fmt.Sprintf(`Mark jobs of a wait group as done: the JOB_IDs given, and those of
--jobs-file (one a line; "-" reads stdin). A job ID is 1..128 bytes of
[-_0-9a-zA-Z]. --metadata is each new job's.

Completion is idempotent per job ID: a job completed already counts nothing
again (its first metadata stays), so running the same command twice is
safe. The output says how many jobs were new. The group completes when
--counter distinct jobs are done.

Jobs are sent in calls of %d, in order; each call is all or none. When one
fails, the calls before it are applied: run the command again.

Exit status: 0 done; 5 new jobs for a group that has EXPIRED (nothing of
that call changed); 1 other failures (new jobs for a COMPLETED group; a
missing group); 2 bad input (also more new jobs than the group has left:
InvalidArgument "too many jobs").`, client.MaxJobsPerCall),
		Example: `  grackle waitgroup complete batch nightly job-0042
  grackle waitgroup complete batch nightly job-1 job-2 job-3 --metadata worker=host-7
  seq -f 'job-%%04g' 1 5000 | grackle waitgroup complete batch nightly --jobs-file -`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 2 {
				return usagef("want arguments NAMESPACE WAIT_GROUP JOB_ID..., got %d", len(args))
			}
			for i, v := range args {
				name := [...]string{"NAMESPACE", "WAIT_GROUP", "JOB_ID"}[min(i, 2)]
				if v == "" {
					return usagef("%s: must not be empty", name)
				}
				if err := fsm.ValidateName("name", v); err != nil {
					return usagef("%s %s: %s", name, quoteArg(v), fsmProblem(err))
				}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			ids := args[2:]
			if changed(cmd, "jobs-file") {
				more, err := a.readJobIDs(file)
				if err != nil {
					return err
				}
				ids = append(ids, more...)
			}
			if len(ids) == 0 {
				return usagef("no jobs: give JOB_IDs or --jobs-file")
			}
			meta, err := parseMetadata(md)
			if err != nil {
				return err
			}
			return a.completeJobs(cmd, args[0], args[1], ids, meta)
		},
	}
	cmd.Flags().StringVar(&file, "jobs-file", "", "read job IDs from this file, one a line (\"-\": stdin)")
	metadataFlag(cmd.Flags(), &md, "each new job's")
	return cmd
}

// readJobIDs reads one job ID a line (blank lines skipped) from file, or
// stdin for "-".
func (a *app) readJobIDs(file string) ([]string, error) {
	var r io.Reader
	if file == "-" {
		r = a.stdin
		if r == nil {
			r = os.Stdin
		}
	} else {
		f, err := os.Open(file)
		if err != nil {
			return nil, usagef("--jobs-file %s: %v", quoteArg(file), errors.Unwrap(err))
		}
		defer f.Close()
		r = f
	}
	var ids []string
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan(); line++ {
		if id := strings.TrimSpace(sc.Text()); id != "" {
			if err := fsm.ValidateJobID("job_id", id); err != nil {
				return nil, usagef("--jobs-file %s: line %d: job ID %s: %s", quoteArg(file), line, quoteArg(id), fsmProblem(err))
			}
			ids = append(ids, id)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, usagef("--jobs-file %s: %v", quoteArg(file), err)
	}
	return ids, nil
}

// completeJobs sends ids in calls of client.MaxJobsPerCall and shows the
// group after the last, with the new jobs counted over all calls.
func (a *app) completeJobs(cmd *cobra.Command, ns, wg string, ids []string, meta map[string]string) error {
	out := &pb.CompleteJobsFromWaitGroupResponse{}
	calls := (len(ids) + client.MaxJobsPerCall - 1) / client.MaxJobsPerCall
	for i := 0; i < len(ids); i += client.MaxJobsPerCall {
		batch := ids[i:min(i+client.MaxJobsPerCall, len(ids))]
		jobs := make([]*pb.WaitGroupJob, len(batch))
		for j, id := range batch {
			jobs[j] = &pb.WaitGroupJob{JobId: id, Metadata: meta}
		}
		resp, err := call(a, cmd, 0, func(ctx context.Context, c clients) (*pb.CompleteJobsFromWaitGroupResponse, error) {
			return c.api.CompleteJobsFromWaitGroup(ctx, &pb.CompleteJobsFromWaitGroupRequest{NamespaceName: ns, WaitGroupName: wg, Jobs: jobs})
		})
		if err != nil {
			var ee *exitError
			if errors.As(err, &ee) {
				if notActiveExpired(ee.callErr) {
					ee.code = exitExpired
				}
				if calls > 1 {
					ee.lead = fmt.Sprintf("call %d of %d (jobs %d..%d; the calls before it are applied)", i/client.MaxJobsPerCall+1, calls, i+1, i+len(batch))
				}
			}
			return err
		}
		out.WaitGroup = resp.GetWaitGroup()
		out.NewlyCompleted += resp.GetNewlyCompleted()
	}
	g := out.GetWaitGroup()
	v := waitGroupView(out, g)
	v.done = fmt.Sprintf("%d new of %d job(s) given; %d of %d done, %s", out.GetNewlyCompleted(), len(ids),
		g.GetCompletedJobs(), g.GetCounter(), waitGroupStatusName(g.GetStatus()))
	return a.show(v)
}

// notActiveExpired reports whether err is the server refusing new jobs
// because the group has expired (reason WAIT_GROUP_NOT_ACTIVE, status
// EXPIRED in the error's metadata).
func notActiveExpired(err error) bool {
	if status.Code(err) != codes.FailedPrecondition || apierr.ReasonOf(err) != apierr.WaitGroupNotActive {
		return false
	}
	s := apierr.Info(err).GetMetadata()[apierr.KeyStatus]
	return s == pb.WaitGroupStatus_WAIT_GROUP_STATUS_EXPIRED.String() || s == "EXPIRED"
}

func (a *app) waitGroupJobsCmd() *cobra.Command {
	var lf listFlags
	cmd := &cobra.Command{
		Use:   "jobs NAMESPACE WAIT_GROUP",
		Short: "List the completed jobs of a wait group, ordered by job ID",
		Args:  positional("NAMESPACE", "WAIT_GROUP"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := lf.check(cmd); err != nil {
				return err
			}
			resp, err := call(a, cmd, 0, func(ctx context.Context, c clients) (*pb.ListWaitGroupCompletedJobsResponse, error) {
				return c.api.ListWaitGroupCompletedJobs(ctx, &pb.ListWaitGroupCompletedJobsRequest{
					NamespaceName: args[0], WaitGroupName: args[1], Limit: lf.limit, PaginationToken: lf.token,
				})
			})
			if err != nil {
				return err
			}
			return a.show(waitGroupJobsView(resp))
		},
	}
	lf.register(cmd.Flags())
	return cmd
}

func (a *app) waitGroupWaitCmd() *cobra.Command {
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "wait NAMESPACE WAIT_GROUP [--wait 5m]",
		Short: "Wait until a wait group has completed (or expired), up to --wait",
		Long: `Wait until a wait group has finished: all its jobs done (COMPLETED) or its
expires_at passed first (EXPIRED), for up to --wait (default 5m; whole
seconds, rounded up). --wait 0 looks once without waiting. The wait runs on
the leader, woken by the commit that finishes the group; a --wait longer
than the server's maximum (300s) is several calls, one after another, and a
leader change is retried on the new leader. Each call's deadline is its
wait plus --timeout. On a terminal, a status line shows how long it has
waited, how much wait is left and the jobs done of the counter, read once a
second (not with --quiet). The group is printed when the wait ends.

Exit status: 0 COMPLETED; 3 TIMED_OUT (not finished within --wait); 5
EXPIRED (the group will never complete); 1 the call failed (a missing
group, or one deleted while waited for: NotFound); 2 bad input; 130
interrupted.`,
		Example: `  grackle waitgroup wait batch nightly --wait 6h && ./publish-report.sh

  grackle waitgroup wait batch nightly --wait 0 -o template='{{.outcome}}'   # look once`,
		Args: positional("NAMESPACE", "WAIT_GROUP"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := wholeSeconds(cmd, "wait", wait, 0); err != nil {
				return err
			}
			what := fmt.Sprintf("wait group %s/%s", args[0], args[1])
			stop, err := a.waitProgress(cmd, what, wait, func(ctx context.Context, cli *client.Client) string {
				r, err := cli.GetWaitGroup(ctx, &pb.GetWaitGroupRequest{NamespaceName: args[0], WaitGroupName: args[1]})
				if err != nil {
					return ""
				}
				return fmt.Sprintf("%d of %d jobs done", r.GetWaitGroup().GetCompletedJobs(), r.GetWaitGroup().GetCounter())
			})
			if err != nil {
				return err
			}
			resp, err := waitLoop(a, cmd, wait, func(ctx context.Context, c clients, secs int64) (*pb.WaitForWaitGroupResponse, error) {
				return c.api.WaitForWaitGroup(ctx, &pb.WaitForWaitGroupRequest{NamespaceName: args[0], WaitGroupName: args[1], TimeoutSeconds: secs})
			}, func(r *pb.WaitForWaitGroupResponse) bool {
				return r.GetOutcome() == pb.WaitGroupWaitOutcome_WAIT_GROUP_WAIT_OUTCOME_TIMED_OUT
			})
			stop()
			if err != nil {
				return err
			}
			if err := a.show(waitGroupWaitView(resp)); err != nil {
				return err
			}
			return waitGroupWaitResult(args[1], wait, resp, a.now())
		},
	}
	durationVar(cmd.Flags(), &wait, "wait", defaultWait, "how long to wait (0: look once; longer than the server's 300s maximum: several calls)")
	return cmd
}

// waitGroupWaitResult is nil when the group completed, else the exit
// error that says how the wait ended.
func waitGroupWaitResult(name string, wait time.Duration, r *pb.WaitForWaitGroupResponse, now time.Time) error {
	g := r.GetWaitGroup()
	done := fmt.Sprintf("%d of %d jobs done", g.GetCompletedJobs(), g.GetCounter())
	switch r.GetOutcome() {
	case pb.WaitGroupWaitOutcome_WAIT_GROUP_WAIT_OUTCOME_COMPLETED:
		return nil
	case pb.WaitGroupWaitOutcome_WAIT_GROUP_WAIT_OUTCOME_EXPIRED:
		at := ""
		if ts := cmp.Or(g.GetFinishedAt(), g.GetExpiresAt()); ts != 0 {
			at = " at " + fmtTime(ts, now)
		}
		return &exitError{code: exitExpired, msg: fmt.Sprintf("EXPIRED: wait group %q expired%s with %s; it will never complete",
			name, at, done)}
	case pb.WaitGroupWaitOutcome_WAIT_GROUP_WAIT_OUTCOME_TIMED_OUT:
		if wait == 0 {
			return &exitError{code: exitNotAcquired, msg: fmt.Sprintf("TIMED_OUT: wait group %q has not finished (%s; --wait 30s waits)", name, done)}
		}
		return &exitError{code: exitNotAcquired, msg: fmt.Sprintf("TIMED_OUT: wait group %q not finished within %s (%s)", name, wait, done)}
	default:
		return &exitError{code: exitCallFailed, msg: fmt.Sprintf("unexpected outcome %s", r.GetOutcome())}
	}
}

// ---- waiting (wait groups and barriers) ----

// waitLoop runs a server-side wait (once, with the wait in whole seconds)
// until it ends with something other than a time-out (timedOut false) or
// wait has passed: each call asks for what is left of wait, at most
// maxServerWait, with a deadline of that plus --timeout. Wait 0 is one
// call with timeout 0 (look once).
func waitLoop[R any](a *app, cmd *cobra.Command, wait time.Duration,
	once func(ctx context.Context, c clients, secs int64) (R, error), timedOut func(R) bool) (R, error) {
	end := time.Now().Add(wait)
	for {
		var secs int64
		if wait > 0 {
			left := min(max(time.Until(end), time.Second), maxServerWait)
			secs = int64((left + time.Second - 1) / time.Second)
		}
		r, err := call(a, cmd, time.Duration(secs)*time.Second, func(ctx context.Context, c clients) (R, error) {
			return once(ctx, c, secs)
		})
		if err != nil || !timedOut(r) || wait == 0 || time.Until(end) <= 0 {
			return r, err
		}
	}
}

// waitProgress starts the status line of a waiting command (on a
// terminal, without --quiet, and for a wait of more than 0): what it waits
// for, how long so far and how much is left, and progress(), read once a
// second. stop ends it.
func (a *app) waitProgress(cmd *cobra.Command, what string, wait time.Duration,
	progress func(ctx context.Context, cli *client.Client) string) (stop func(), err error) {
	if wait <= 0 || !a.statusLine().Enabled() {
		return func() {}, nil
	}
	dctx, cancel := context.WithTimeout(cmdContext(cmd), a.timeout)
	cli, err := a.client(dctx)
	cancel()
	if err != nil {
		return nil, a.connectError(cmdContext(cmd), err)
	}
	return a.waitStatusFollowing(what, wait, func(ctx context.Context, set func(string)) {
		t := time.NewTicker(progressEvery)
		defer t.Stop()
		for {
			pctx, cancel := context.WithTimeout(ctx, progressEvery)
			p := progress(pctx, cli)
			cancel()
			if ctx.Err() != nil {
				return
			}
			if p != "" {
				set(p)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}), nil
}

// ---- output ----

// waitGroupStatusName is COMPLETED for WAIT_GROUP_STATUS_COMPLETED.
func waitGroupStatusName(s pb.WaitGroupStatus) string {
	return strings.TrimPrefix(s.String(), "WAIT_GROUP_STATUS_")
}

// keepText says what a delete_after_finished_seconds or
// delete_inactive_after_seconds means.
func keepText(secs int64, after string) string {
	if secs == 0 {
		return "never"
	}
	return (time.Duration(secs) * time.Second).String() + " after " + after
}

// expiresText is fmtTime, with "never" for 0.
func expiresText(ns int64, now time.Time) string {
	if ns == 0 {
		return "never"
	}
	return fmtTime(ns, now)
}

func waitGroupKV(g *pb.WaitGroup, now time.Time) [][2]string {
	return [][2]string{
		{"Name", g.GetName()},
		{"Description", g.GetDescription()},
		{"Status", waitGroupStatusName(g.GetStatus())},
		{"Jobs done", fmt.Sprintf("%d of %d (%d left)", g.GetCompletedJobs(), g.GetCounter(), max(g.GetCounter()-g.GetCompletedJobs(), 0))},
		{"Expires", expiresText(g.GetExpiresAt(), now)},
		{"Finished", fmtTime(g.GetFinishedAt(), now)},
		{"Deleted", keepText(g.GetDeleteAfterFinishedSeconds(), "finishing")},
		{"Metadata", fmtMetadata(g.GetMetadata())},
		{"Version", itoa(g.GetVersion())},
		{"Created", fmtTime(g.GetCreatedAt(), now)},
		{"Updated", fmtTime(g.GetUpdatedAt(), now)},
		{"Last activity", fmtTime(g.GetLastActivityAt(), now)},
	}
}

func waitGroupView(resp proto.Message, g *pb.WaitGroup) view {
	return view{
		msg:   resp,
		ids:   []string{g.GetName()},
		table: func(t *tableOut) { t.kv(waitGroupKV(g, t.now)...) },
	}
}

func waitGroupWaitView(r *pb.WaitForWaitGroupResponse) view {
	g := r.GetWaitGroup()
	return view{
		msg: r,
		ids: []string{g.GetName()},
		table: func(t *tableOut) {
			t.kv(append([][2]string{{"Outcome", strings.TrimPrefix(r.GetOutcome().String(), "WAIT_GROUP_WAIT_OUTCOME_")}}, waitGroupKV(g, t.now)...)...)
		},
	}
}

func waitGroupsView(r *pb.ListWaitGroupsResponse) view {
	return listView(r, r.GetWaitGroups(), (*pb.WaitGroup).GetName,
		[]string{"NAME", "STATUS", "DONE", "COUNTER", "EXPIRES", "FINISHED", "VERSION", "DESCRIPTION"},
		func(g *pb.WaitGroup, now time.Time) []string {
			return []string{g.GetName(), waitGroupStatusName(g.GetStatus()), itoa(g.GetCompletedJobs()), itoa(g.GetCounter()),
				expiresText(g.GetExpiresAt(), now), fmtTime(g.GetFinishedAt(), now), itoa(g.GetVersion()), truncate(g.GetDescription(), 40)}
		})
}

func waitGroupJobsView(r *pb.ListWaitGroupCompletedJobsResponse) view {
	return listView(r, r.GetJobs(), (*pb.WaitGroupJob).GetJobId,
		[]string{"JOB ID", "COMPLETED", "METADATA"},
		func(j *pb.WaitGroupJob, now time.Time) []string {
			return []string{j.GetJobId(), fmtTime(j.GetCompletedAt(), now), truncate(fmtMetadata(j.GetMetadata()), 60)}
		})
}
