package main

// How grackle reports an error: one line on stderr,
//
//	grackle: <command path>: <what went wrong>[ (<the fix>)]
//
// whether the error is grackle's own (a bad flag) or the server's (a
// status the call failed with). A flag is named as the user gave it, with
// the value typed (--wait 10m, GRACKLE_TIMEOUT=0), also when the server
// refused the field it became: the server names the field in a structured
// detail (apierr.FieldOf), never only in its message, and fieldInputs maps
// it back to the command's flag or argument.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grackle-coord/grackle/acl"
	"github.com/grackle-coord/grackle/apierr"
	"github.com/grackle-coord/grackle/fsm"
)

// exitError ends the process with code after printing "grackle: <command
// path>: msg" (nothing when msg is empty and there is no call error).
type exitError struct {
	code int
	// callErr is the failed call's error (nil when not a call). When msg
	// is empty, the printed line is made from it (callMessage).
	callErr error
	msg     string
	// lead, when set, starts a line made from callErr (which call of
	// several failed), note ends it (what it means here), after "; ".
	lead, note string
}

func (e *exitError) Error() string {
	if e.msg == "" && e.callErr != nil {
		return e.callErr.Error()
	}
	return e.msg
}

// usageError is a bad flag value or argument (exit 2). Its message is
// prefixed with the command path when printed.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// report prints err as one line on stderr and returns the exit code.
func (a *app) report(cmd *cobra.Command, err error) int {
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		msg := ee.msg
		if msg == "" && ee.callErr != nil {
			msg = a.callMessage(cmd, ee.callErr)
			if ee.lead != "" {
				msg = ee.lead + ": " + msg
			}
			if ee.note != "" {
				msg += "; " + ee.note
			}
		}
		if msg != "" {
			fmt.Fprintf(a.stderr, "grackle: %s%s\n", commandPrefix(cmd), oneLine(msg))
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

// callError turns a call's error into its exit error: "interrupted" (130)
// when the parent context was cancelled; exit 2 for InvalidArgument (the
// server rejected the input, as a local check would), 1 for any other
// failure. The line printed is made when the command is known (report).
func callError(parent context.Context, err error) error {
	if parent.Err() != nil && errors.Is(parent.Err(), context.Canceled) {
		return &exitError{code: exitInterrupted, msg: "interrupted"}
	}
	code := exitCallFailed
	if st := grpcStatus(err); st != nil && st.Code() == codes.InvalidArgument {
		code = exitUsage
	}
	return &exitError{code: code, callErr: err}
}

// grpcStatus is the server's own status in err, found through the Go
// client's wrapping (status.FromError of a wrapped error would give the
// whole chain's text, "grackle: ...: rpc error: code = ... desc = ...", as
// its message); nil when err carries none.
func grpcStatus(err error) *status.Status {
	var se interface{ GRPCStatus() *status.Status }
	if !errors.As(err, &se) {
		return nil
	}
	return se.GRPCStatus()
}

// ownPrefixes are how the Go client starts its own messages; the line
// already starts with "grackle: ".
var ownPrefixes = []string{"grackle client: ", "grackle: "}

func trimOwnPrefix(s string) string {
	for _, p := range ownPrefixes {
		s = strings.TrimPrefix(s, p)
	}
	return s
}

// callMessage is what went wrong in a call, for people: the server's
// message (or the field it refused, as the flag or argument the user
// gave), and where it helps, the fix.
func (a *app) callMessage(cmd *cobra.Command, err error) string {
	st := grpcStatus(err)
	if st == nil {
		return trimOwnPrefix(oneLine(err.Error()))
	}
	msg := trimOwnPrefix(st.Message())
	if st.Code() == codes.InvalidArgument {
		if m, ok := fieldMessage(cmd, err); ok {
			return m
		}
	}
	switch {
	case st.Code() == codes.Unauthenticated && apierr.ReasonOf(err) == acl.ReasonTokenUnknown:
		msg += " (check " + flagSource(cmd, "token") + ")"
	case st.Code() == codes.DeadlineExceeded:
		msg += " (the call's deadline passed: " + flagSource(cmd, flagTimeout) + " sets it)"
	}
	return msg
}

// flagSource names where a flag's value came from, for a fix: "--token",
// or "GRACKLE_TOKEN" when the environment set it.
func flagSource(cmd *cobra.Command, name string) string {
	if cmd != nil {
		if f := cmd.Flags().Lookup(name); f != nil && envKey(f) != "" {
			return envKey(f)
		}
	}
	if cmd != nil && cmd.Flags().Lookup(name) != nil && !cmd.Flags().Changed(name) {
		return "--" + name + " or " + envName(name)
	}
	return "--" + name
}

// fieldInputs are, for each request field the server may refuse, the
// flags (--name) and arguments (NAME, as the command's usage line calls
// them) that carry it, in order of preference: the first the command has
// is the one named.
var fieldInputs = map[string][]string{
	"name":                          {"NAMESPACE"},
	"namespace_name":                {"NAMESPACE", "--namespace"},
	"semaphore_name":                {"SEMAPHORE", "--semaphore"},
	"lock_name":                     {"LOCK", "--lock"},
	"wait_group_name":               {"WAIT_GROUP"},
	"barrier_name":                  {"BARRIER"},
	"lease_id":                      {"--lease", "LEASE_ID"},
	"process_id":                    {"--process-id"},
	"ttl_seconds":                   {"--ttl"},
	"timeout_seconds":               {"--wait"},
	"weight":                        {"--weight"},
	"permits":                       {"--permits"},
	"description":                   {"--description"},
	"metadata":                      {"--metadata"},
	"expected_version":              {"--expected-version"},
	"counter":                       {"--counter"},
	"expected_processes":            {"--expected-processes"},
	"delete_after_finished_seconds": {"--delete-after-finished"},
	"delete_inactive_after_seconds": {"--delete-inactive-after"},
	"expires_at":                    {"--expires-at", "--expires-in"},
	"expected_generation":           {"--generation"},
	"generation":                    {"--generation"},
	"limit":                         {"--limit"},
	"pagination_token":              {"--page-token"},
	"prefix":                        {"--prefix"},
	"node_id":                       {"NODE_ID"},
	"raft_address":                  {"--raft-addr"},
	"grpc_address":                  {"--grpc-addr"},
	"role":                          {"--role"},
	"namespace":                     {"--namespace"},
	"id":                            {"ID"},
}

// input is a flag or argument of the command line.
type input struct {
	ref  string      // --wait 10m, --ttl 1m0s (the default), NAMESPACE "bad name"
	flag *pflag.Flag // nil for an argument
	arg  string      // the argument's value
}

// inputFor finds the flag or argument of cmd that carries field. A flag
// counts when it was given, or when its default is what was sent (a
// non-zero default: a zero one means "the server's choice" or "read it
// first", and the request carried something else).
func inputFor(cmd *cobra.Command, field string) (input, bool) {
	if cmd == nil {
		return input{}, false
	}
	for _, name := range fieldInputs[field] {
		if flag, ok := strings.CutPrefix(name, "--"); ok {
			f := cmd.Flags().Lookup(flag)
			if f == nil || (!f.Changed && zeroDefault(f)) {
				continue
			}
			return input{ref: flagRef(cmd, flag), flag: f}, true
		}
		if i := argIndex(cmd.Use, name); i >= 0 && i < len(cmd.Flags().Args()) {
			v := cmd.Flags().Args()[i]
			return input{ref: name + " " + quoteArg(v), arg: v}, true
		}
	}
	return input{}, false
}

func zeroDefault(f *pflag.Flag) bool {
	switch f.DefValue {
	case "", "0", "0s", "[]", "false":
		return true
	}
	return false
}

// argIndex is the position of the argument name in a usage line
// ("acquire NAMESPACE SEMAPHORE --lease LEASE_ID": SEMAPHORE is 1;
// LEASE_ID, a flag's value, is none), or -1.
func argIndex(use, name string) int {
	words := strings.Fields(use)
	i := 0
	for j := 1; j < len(words); j++ {
		w := words[j]
		if strings.HasPrefix(w, "-") || strings.HasPrefix(w, "[") || strings.HasPrefix(w, "(") {
			if strings.HasPrefix(w, "-") && !strings.Contains(w, "=") {
				j++ // the flag's value
			}
			continue
		}
		if strings.TrimSuffix(w, "...") == name {
			return i
		}
		i++
	}
	return -1
}

// flagRef is how the user gave a flag: "--wait 10m" (as typed),
// "GRACKLE_TIMEOUT=0" (from the environment), "--ttl 1m0s (the default)".
func flagRef(cmd *cobra.Command, name string) string {
	f := cmd.Flags().Lookup(name)
	if f == nil {
		return "--" + name
	}
	text := flagText(f)
	if key := envKey(f); key != "" {
		return key + "=" + text
	}
	if !f.Changed {
		return "--" + name + " " + quoteArg(text) + " (the default)"
	}
	return "--" + name + " " + quoteArg(text)
}

// flagText is a flag's value as the user typed it where it is known (a
// duration keeps "10m"), else as the flag prints it.
func flagText(f *pflag.Flag) string {
	if d, ok := f.Value.(*durationValue); ok && d.raw != "" {
		return d.raw
	}
	return f.Value.String()
}

// quoteArg quotes what a shell would not read back as one word.
func quoteArg(s string) string {
	if s == "" || strings.ContainsAny(s, " \t\n\"'\\$`|&;<>(){}*?[]!#~") {
		return strconv.Quote(s)
	}
	return s
}

// flagError is a usage error about a flag of cmd: "--name VALUE: msg".
func flagError(cmd *cobra.Command, name, format string, args ...any) error {
	return usagef("%s: %s", flagRef(cmd, name), fmt.Sprintf(format, args...))
}

// envAnnotation marks a flag set from the environment (applyEnv), with
// the variable's name.
const envAnnotation = "grackle-env"

// envKey is the environment variable that set f ("" when none did).
func envKey(f *pflag.Flag) string {
	if v := f.Annotations[envAnnotation]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// fieldMessage says what the server refused as the flag or argument the
// user gave: "--wait 10m: at most 5m0s". ok is false when err names no
// field, or one this command has no input for.
func fieldMessage(cmd *cobra.Command, err error) (string, bool) {
	field, desc := apierr.FieldOf(err)
	if field == "" {
		return "", false
	}
	in, ok := inputFor(cmd, field)
	if !ok {
		return "", false
	}
	if apierr.ReasonOf(err) == apierr.WeightExceedsPermits {
		if p := apierr.Info(err).GetMetadata()[apierr.KeyPermits]; p != "" {
			return fmt.Sprintf("%s: more than the semaphore's %s permits, so it can never be acquired", in.ref, p), true
		}
	}
	if b, ok := apierr.BoundsOf(err); ok && in.flag != nil {
		if m := boundsText(in.flag, field, b); m != "" {
			return in.ref + ": " + m, true
		}
	}
	return in.ref + ": " + desc, true
}

// boundsText says which bound a number flag crossed, in the flag's unit (a
// duration flag of a *_seconds field in durations): "at most 5m0s". It is
// "" when the flag's value cannot be read as that number.
func boundsText(f *pflag.Flag, field string, b apierr.Bounds) string {
	var v int64
	show := func(n int64) string { return strconv.FormatInt(n, 10) }
	if d, ok := f.Value.(*durationValue); ok && strings.HasSuffix(field, "_seconds") {
		v = int64((*d.p + time.Second - 1) / time.Second) // as sent: whole seconds, rounded up
		show = func(n int64) string { return (time.Duration(n) * time.Second).String() }
	} else {
		n, err := strconv.ParseInt(f.Value.String(), 10, 64)
		if err != nil {
			return ""
		}
		v = n
	}
	switch {
	case b.HasMax && v > b.Max:
		return "at most " + show(b.Max)
	case v < b.Min:
		return "at least " + show(b.Min)
	case b.HasMax:
		return "must be " + show(b.Min) + ".." + show(b.Max)
	}
	return "must be at least " + show(b.Min)
}

// flagValueError is a flag value that does not parse: "--wait 10x: want a
// duration like 30s, ..." (pflag's own wording names the Go parser).
func flagValueError(ref string, f *pflag.Flag, cause error) error {
	switch f.Value.Type() {
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
		return usagef("%s: want a whole number", ref)
	case "bool":
		return usagef("%s: want true or false", ref)
	}
	return usagef("%s: %v", ref, cause)
}

// fsmProblem is what a local check with the API's own validation (package
// fsm) found wrong, without the field name it starts with.
func fsmProblem(err error) string {
	var fe *fsm.Error
	if errors.As(err, &fe) {
		return strings.TrimPrefix(fe.Msg, fe.Field+": ")
	}
	return err.Error()
}

// leaseLost is the exit (4) of a command whose lease the server says is
// gone (leaseGone): the server's words, and what they mean here.
func leaseLost(err error) error {
	var ee *exitError
	if !errors.As(err, &ee) {
		return err
	}
	return &exitError{code: exitLeaseLost, callErr: ee.callErr, note: "the lease is lost"}
}
