// Command grackle is the Grackle node (`grackle server`) and its
// command-line client (`grackle namespace|semaphore|lease|lock|waitgroup|barrier|cluster|run ...`).
//
// Exit codes (also in `grackle --help`):
//
//	0   success
//	1   the call failed (a gRPC error other than InvalidArgument, no endpoint reachable, the server stopped with an error)
//	2   bad input: an unknown command or flag, a bad flag value or argument, or input the server rejected with InvalidArgument
//	3   not acquired (`semaphore acquire`, `lock acquire`, `run`: outcome UNAVAILABLE or TIMED_OUT), or not reached (`waitgroup wait`, `barrier wait`, `barrier arrive --wait`: TIMED_OUT)
//	4   lease lost (`run`: while the command ran; `lease refresh`, `lock lease refresh`, `semaphore acquire`, `lock acquire`: the lease no longer exists, by the server's NotFound with reason LEASE_NOT_FOUND or NAMESPACE_NOT_FOUND)
//	5   wait group expired (`waitgroup wait`: outcome EXPIRED; `waitgroup complete`: new jobs for an expired group, FailedPrecondition WAIT_GROUP_NOT_ACTIVE with status EXPIRED)
//	130 interrupted (SIGINT/SIGTERM)
//
// Every error is one line on stderr, starting with "grackle: ".
package main

import (
	"context"
	"crypto/tls"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/grackle-coord/grackle/client"
	"github.com/grackle-coord/grackle/internal/statusline"
	"github.com/grackle-coord/grackle/server"
	"github.com/grackle-coord/grackle/version"
)

// Exit codes; see the package comment.
const (
	exitOK          = 0
	exitCallFailed  = 1
	exitUsage       = 2
	exitNotAcquired = 3
	exitLeaseLost   = 4
	exitExpired     = 5
	exitInterrupted = 130
)

// exitCodesHelp is the exit code list of --help.
const exitCodesHelp = `Exit codes:
  0    ok
  1    the call failed
  2    bad input (a usage error, or input the server rejected as InvalidArgument)
  3    not acquired (semaphore acquire, lock acquire, run: UNAVAILABLE or
       TIMED_OUT), or not reached (waitgroup wait, barrier wait, barrier
       arrive --wait: TIMED_OUT)
  4    lease lost (run: while the command ran; lease refresh, lock lease
       refresh, semaphore acquire, lock acquire: the lease is gone)
  5    wait group expired (waitgroup wait: EXPIRED; waitgroup complete: new
       jobs for an expired group)
  130  interrupted (SIGINT/SIGTERM)`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// After the first signal, restore the default handling so that a
		// second Ctrl-C kills a process that is slow to shut down.
		<-ctx.Done()
		stop()
	}()
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.LookupEnv)
	stop()
	os.Exit(code)
}

// run executes the command line args and returns the process exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, lookupEnv func(string) (string, bool)) int {
	a := &app{
		stdout:     stdout,
		stderr:     stderr,
		stdin:      os.Stdin,
		lookupEnv:  lookupEnv,
		now:        time.Now,
		runServer:  server.Run,
		isTerminal: statusline.IsTerminal,
	}
	return a.execute(ctx, args)
}

// app is the state shared by all commands: where output goes, how the
// environment is read, and the client flags (bound once per command group).
type app struct {
	stdout, stderr io.Writer
	stdin          io.Reader   // --jobs-file - (nil: os.Stdin)
	sniffer        httpSniffer // notices an HTTP port given as an endpoint
	lookupEnv      func(string) (string, bool)
	now            func() time.Time
	runServer      func(context.Context, server.Config) error
	isTerminal     func(io.Writer) bool // where a status line may be drawn

	// Client flags (persistent on each client command group).
	endpoints []string
	timeout   time.Duration
	output    string
	cacert    string
	cert      string
	key       string
	token     string
	tls       *tls.Config // from cacert, cert, key (checkClientFlags)
	quiet     bool

	cli *client.Client // the command's Go client, once connected
}

func (a *app) execute(ctx context.Context, args []string) int {
	if args == nil {
		args = []string{} // cobra reads os.Args when args is nil
	}
	root := a.rootCmd()
	if err := checkLeadingFlags(root, args); err != nil {
		return a.report(root, err)
	}
	root.SetArgs(args)
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	cmd, err := root.ExecuteContextC(ctx)
	a.closeClient()
	return a.report(cmd, err)
}

func (a *app) rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "grackle",
		Short: "Grackle: a Raft-replicated distributed semaphore service",
		Long: `Grackle is a Raft-replicated distributed semaphore service.

Run a node with "grackle server"; manage namespaces, semaphores, locks,
leases, wait groups and barriers with the client commands. They use the Go client: given any members
(--endpoints), it finds the leader, follows it across elections, retries
what is safe to retry, and goes through the endpoints when a member's
advertised address cannot be reached from here (followers forward).

Durations are Go durations (30s, 1m, 250ms); a bare number is seconds.

` + exitCodesHelp,
		SilenceUsage:      true,
		SilenceErrors:     true,
		PersistentPreRunE: a.preRun,
		// An unknown command is a usage error with a suggestion, not
		// cobra's two-line text.
		Args: cobra.ArbitraryArgs,
		RunE: unknownSubcommand,
	}
	root.SetFlagErrorFunc(flagParseError)
	// Also here so that it may come before the command (grackle -q
	// cluster status): the command finder must know it takes no value.
	// The client commands define their own, bound to the same field.
	root.PersistentFlags().BoolVarP(&a.quiet, "quiet", "q", false, "no status line while waiting, no client warnings on stderr")
	for _, c := range a.commands() {
		root.AddCommand(c)
	}
	a.attachCompletion(root)
	root.Version = version.Get().String()
	root.SetVersionTemplate("{{.Version}}\n")
	return root
}

// commands are grackle's top-level commands, in --help order. A new
// command group is one line here (and a file of its own).
func (a *app) commands() []*cobra.Command {
	return []*cobra.Command{
		a.serverCmd(),
		a.namespaceCmd(),
		a.semaphoreCmd(),
		a.leaseCmd(),
		a.lockCmd(),
		a.waitGroupCmd(),
		a.barrierCmd(),
		a.clusterCmd(),
		a.benchCmd(),
		a.runCmd(),
		a.snapshotCmd(),
		a.healthCmd(),
		a.aclCmd(),
		a.versionCmd(),
	}
}

// preRun runs before every command: it applies GRACKLE_* environment
// variables to the client flags and checks them.
func (a *app) preRun(cmd *cobra.Command, _ []string) error {
	g := groupOf(cmd)
	if g == nil || g.PersistentFlags().Lookup(flagEndpoints) == nil {
		return nil // not a client command (server, help, completion)
	}
	if err := applyEnv(g.PersistentFlags(), a.lookupEnv); err != nil {
		return err
	}
	if err := a.checkClientFlags(cmd); err != nil {
		return err
	}
	return checkFlagShapes(cmd)
}

// groupOf returns the child of the root that cmd belongs to.
func groupOf(cmd *cobra.Command) *cobra.Command {
	for c := cmd; c != nil && c.HasParent(); c = c.Parent() {
		if !c.Parent().HasParent() {
			return c
		}
	}
	return nil
}
