package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/grackle-coord/grackle/client"
	"github.com/grackle-coord/grackle/internal/statusline"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

func (a *app) semaphoreWaitersCmd() *cobra.Command {
	var lf listFlags
	cmd := &cobra.Command{
		Use:   "waiters NAMESPACE SEMAPHORE",
		Short: "List the calls waiting for a semaphore, head of the queue first",
		Long: `List the calls waiting for a semaphore, in queue order (position 1 is the
head): lease, process, the weight asked for and the part of it still waited
for (a re-acquire that raises a hold waits only for the difference), since
when, and until when. The queue lives in the leader's memory: after a
leader change it is rebuilt as the waiting clients retry (docs/watch.md).`,
		Example: "  grackle semaphore waiters third_parties partner_1",
		Args:    positional("NAMESPACE", "SEMAPHORE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := lf.check(cmd); err != nil {
				return err
			}
			resp, err := call(a, cmd, 0, func(ctx context.Context, c clients) (*pb.ListSemaphoreWaitersResponse, error) {
				return c.api.ListSemaphoreWaiters(ctx, &pb.ListSemaphoreWaitersRequest{
					NamespaceName: args[0], SemaphoreName: args[1], Limit: lf.limit, PaginationToken: lf.token,
				})
			})
			if err != nil {
				return err
			}
			return a.show(waitersView(resp))
		},
	}
	lf.register(cmd.Flags())
	return cmd
}

func waitersView(r *pb.ListSemaphoreWaitersResponse) view {
	return listView(r, r.GetWaiters(), (*pb.SemaphoreWaiter).GetLeaseId,
		[]string{"POSITION", "LEASE ID", "PROCESS ID", "WEIGHT", "WAITING FOR", "SINCE", "DEADLINE"},
		func(w *pb.SemaphoreWaiter, now time.Time) []string {
			return []string{itoa(w.GetPosition()), w.GetLeaseId(), w.GetProcessId(), itoa(w.GetWeight()),
				itoa(w.GetWaitingWeight()), fmtTime(w.GetWaitingSince(), now), fmtTime(w.GetDeadline(), now)}
		})
}

func (a *app) semaphoreWatchCmd() *cobra.Command {
	var count int
	cmd := &cobra.Command{
		Use:   "watch NAMESPACE SEMAPHORE",
		Short: "Print a semaphore's holders and queue, then every change, as they happen",
		Long: `Print a semaphore's state (permits, holders, waiters), then a line after every
change, until interrupted (or --count states were printed). Changes that
come faster than they are printed are folded into one line ("+N changes").
Each line names the Raft index it reflects. Across a leader change the watch
resumes on the new leader and prints its whole state again ("resumed").

-o json prints one JSON object per state (the WatchSemaphoreResponse), one
per line. The command ends with exit status 0 when interrupted or after
--count states; 1 when the semaphore is deleted or the watch fails.`,
		Example: `  grackle semaphore watch third_parties partner_1
  grackle semaphore watch third_parties partner_1 -o json --count 1   # the state once, as JSON`,
		Args: positional("NAMESPACE", "SEMAPHORE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runWatch(a, cmd, count, func(ctx context.Context, cli *client.Client) <-chan client.WatchUpdate {
				return cli.Watch(ctx, args[0], args[1])
			}, func(u client.WatchUpdate) error { return u.Err }, a.printWatch)
		},
	}
	cmd.Flags().IntVar(&count, "count", 0, "stop after this many states (0 = until interrupted)")
	return cmd
}

// runWatch is the body of `semaphore watch` and `lock watch`: it prints
// the states open's watch sends (with printState) until the watch is
// interrupted, which is its normal end, count states were printed (0: no
// end) or it fails (errOf(u) is the error of the last update).
func runWatch[U any](a *app, cmd *cobra.Command, count int, open func(ctx context.Context, cli *client.Client) <-chan U, errOf func(U) error, printState func(U) error) error {
	if count < 0 {
		return flagError(cmd, "count", "must be 0 (no end) or more")
	}
	ctx, cancel := context.WithCancel(cmdContext(cmd))
	defer cancel()
	dctx, dcancel := context.WithTimeout(ctx, a.timeout)
	cli, err := a.client(dctx)
	dcancel()
	if err != nil {
		return a.connectError(cmdContext(cmd), err)
	}
	n := 0
	for u := range open(ctx, cli) {
		if err := errOf(u); err != nil {
			if cmdContext(cmd).Err() != nil {
				return nil // interrupted: the normal end of a watch
			}
			return callError(ctx, err)
		}
		if err := printState(u); err != nil {
			return err
		}
		if n++; count > 0 && n >= count {
			return nil
		}
	}
	return nil
}

func (a *app) printWatch(u client.WatchUpdate) error {
	return a.printWatchState(u.State, func() string { return watchLine(u, a.now()) })
}

// printWatchState prints one watched state: with -o json the whole
// message on one line, else line's one line for people.
func (a *app) printWatchState(m proto.Message, line func() string) error {
	if a.output == "json" {
		b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(m)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(a.stdout, string(b))
		return err
	}
	fmt.Fprintln(a.stdout, line())
	return nil
}

// watchedState is what writeWatchHead reads of a watched state, of a
// semaphore or of a lock.
type watchedState interface {
	GetRaftIndex() uint64
	GetInitial() bool
	GetChanges() uint64
}

// writeWatchHead starts a watch line: when, the Raft index, and whether
// the state is a resume, the first one, or several changes folded in.
func writeWatchHead(b *strings.Builder, now time.Time, m watchedState, resumed bool) {
	fmt.Fprintf(b, "%s index %d", now.UTC().Format("15:04:05.000"), m.GetRaftIndex())
	switch {
	case resumed:
		b.WriteString(" (resumed)")
	case m.GetInitial():
		b.WriteString(" (initial)")
	case m.GetChanges() > 1:
		fmt.Fprintf(b, " (+%d changes)", m.GetChanges())
	}
}

// writeBracketed adds " [a b c]" to a watch line, nothing when items is
// empty.
func writeBracketed(b *strings.Builder, items []string) {
	if len(items) > 0 {
		fmt.Fprintf(b, " [%s]", strings.Join(items, " "))
	}
}

// watchLine is one state on one line: when, the Raft index, permits, the
// holders and the queue.
func watchLine(u client.WatchUpdate, now time.Time) string {
	m := u.State
	s := m.GetSemaphore()
	var b strings.Builder
	writeWatchHead(&b, now, m, u.Resumed)
	fmt.Fprintf(&b, ": %d/%d permits held by %d", s.GetActiveHolds(), s.GetPermits(), s.GetActiveHoldersCount())
	var hs []string
	for _, h := range m.GetHolders() {
		hs = append(hs, fmt.Sprintf("%s×%d", h.GetProcessId(), h.GetWeight()))
	}
	writeBracketed(&b, hs)
	fmt.Fprintf(&b, "; %d waiting", m.GetWaitersCount())
	var ws []string
	for _, w := range m.GetWaiters() {
		x := fmt.Sprintf("%d:%s×%d", w.GetPosition(), w.GetProcessId(), w.GetWeight())
		if w.GetWaitingWeight() != w.GetWeight() {
			x += fmt.Sprintf("(+%d)", w.GetWaitingWeight())
		}
		ws = append(ws, x)
	}
	writeBracketed(&b, ws)
	return b.String()
}

// waitStatusInQueue is waitStatus with the call's place in the queue
// ("position 2 of 3 in the queue"), followed through a watch of the
// semaphore while the status line shows (on a terminal, without --quiet).
func (a *app) waitStatusInQueue(cli *client.Client, what string, wait time.Duration, ns, sem, lease string) (stop func()) {
	return a.waitStatusFollowing(what, wait, func(ctx context.Context, set func(string)) {
		for u := range cli.Watch(ctx, ns, sem) {
			if u.Err != nil {
				return
			}
			set(queuePlace(u.State.GetWaiters(), u.State.GetWaitersCount(), lease))
		}
	})
}

// waitStatusFollowing shows a status line for a wait of what, up to wait,
// whose extra text follow keeps up to date (through set) until its
// context ends.
func (a *app) waitStatusFollowing(what string, wait time.Duration, follow func(ctx context.Context, set func(string))) (stop func()) {
	line := a.statusLine()
	if !line.Enabled() {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	place := ""
	done := make(chan struct{})
	go func() {
		defer close(done)
		follow(ctx, func(p string) {
			mu.Lock()
			place = p
			mu.Unlock()
		})
	}()
	start := time.Now()
	w := statusline.Waiting{What: what, Since: start, Deadline: start.Add(wait), Extra: func() string {
		mu.Lock()
		defer mu.Unlock()
		return place
	}}
	stopLine := line.Show(250*time.Millisecond, 250*time.Millisecond, func() string { return w.Text(time.Now()) })
	return func() {
		cancel()
		<-done
		stopLine()
	}
}

// queuePlace says where lease waits in a watched queue, of which waiters
// are the first (of count), for a semaphore or a lock ("" when it does
// not wait there).
func queuePlace[W interface {
	GetLeaseId() string
	GetPosition() int64
}](waiters []W, count int64, lease string) string {
	for _, w := range waiters {
		if w.GetLeaseId() == lease {
			return fmt.Sprintf("position %d of %d in the queue", w.GetPosition(), count)
		}
	}
	if count > int64(len(waiters)) {
		return fmt.Sprintf("behind the first %d of %d in the queue", len(waiters), count)
	}
	return ""
}
