// Command grackle is the Grackle node (`grackle server`) and its
// command-line client (`grackle namespace|semaphore|lease|cluster ...`).
//
// Exit codes:
//
//	0  success
//	1  the call failed (gRPC error, no endpoint reachable, server stopped with an error)
//	2  usage error (unknown command or flag, bad flag value, bad argument)
//	3  `semaphore acquire` did not acquire (outcome UNAVAILABLE or TIMED_OUT)
//	130 interrupted (SIGINT/SIGTERM) while a call was in flight
//
// Every error is one line on stderr, starting with "grackle: ".
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/grackle-coord/grackle/server"
)

// Exit codes; see the package comment.
const (
	exitOK          = 0
	exitCallFailed  = 1
	exitUsage       = 2
	exitNotAcquired = 3
	exitInterrupted = 130
)

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
		stdout:    stdout,
		stderr:    stderr,
		lookupEnv: lookupEnv,
		now:       time.Now,
		runServer: server.Run,
	}
	return a.execute(ctx, args)
}

// app is the state shared by all commands: where output goes, how the
// environment is read, and the client flags (bound once per command group).
type app struct {
	stdout, stderr io.Writer
	lookupEnv      func(string) (string, bool)
	now            func() time.Time
	runServer      func(context.Context, server.Config) error

	// Client flags (persistent on each client command group).
	endpoints []string
	timeout   time.Duration
	output    string
	cacert    string
	cert      string
	key       string
	token     string
	tls       *tls.Config // from cacert, cert, key (checkClientFlags)
}

func (a *app) execute(ctx context.Context, args []string) int {
	if args == nil {
		args = []string{} // cobra reads os.Args when args is nil
	}
	root := a.rootCmd()
	root.SetArgs(args)
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	cmd, err := root.ExecuteContextC(ctx)
	return a.report(cmd, err)
}

// report prints err as one line on stderr and returns the exit code.
func (a *app) report(cmd *cobra.Command, err error) int {
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.msg != "" {
			fmt.Fprintf(a.stderr, "grackle: %s\n", ee.msg)
		}
		return ee.code
	}
	// Everything else is a usage error: ours (usageError) or cobra's own
	// (unknown command or flag, bad flag value).
	fmt.Fprintf(a.stderr, "grackle: %s%s\n", commandPrefix(cmd), oneLine(err.Error()))
	return exitUsage
}

// commandPrefix is "semaphore create: " for `grackle semaphore create`, ""
// for the root command.
func commandPrefix(cmd *cobra.Command) string {
	if cmd == nil || !cmd.HasParent() {
		return ""
	}
	p := strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" ")
	return p + ": "
}

// oneLine keeps an error message on one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// exitError ends the process with code after printing "grackle: msg"
// (nothing when msg is empty).
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// usageError is a bad flag value or argument (exit 2). Its message is
// prefixed with the command path when printed.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

func (a *app) rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "grackle",
		Short: "Grackle: a Raft-replicated distributed semaphore service",
		Long: `Grackle is a Raft-replicated distributed semaphore service.

Run a node with "grackle server"; manage namespaces, semaphores and leases
with the client commands, which talk gRPC to any node (--endpoints; a
follower forwards calls to the leader).

Exit codes: 0 ok, 1 the call failed, 2 usage error, 3 semaphore acquire
did not acquire (UNAVAILABLE or TIMED_OUT), 130 interrupted.`,
		SilenceUsage:      true,
		SilenceErrors:     true,
		PersistentPreRunE: a.preRun,
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &usageError{msg: err.Error()}
	})
	root.AddCommand(
		a.serverCmd(),
		a.namespaceCmd(),
		a.semaphoreCmd(),
		a.leaseCmd(),
		a.clusterCmd(),
		a.benchCmd(),
		a.runCmd(),
	)
	return root
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
	return a.checkClientFlags()
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
