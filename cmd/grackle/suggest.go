package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// flagSuggestion is " (did you mean --permits?)" for an unknown flag close
// to one the command has, else "".
func flagSuggestion(cmd *cobra.Command, err error) string {
	var ne *pflag.NotExistError
	if !errors.As(err, &ne) || ne.GetSpecifiedShortnames() != "" {
		return ""
	}
	best := closestFlag(cmd.Flags(), ne.GetSpecifiedName())
	if best == "" {
		return ""
	}
	return " (did you mean --" + best + "?)"
}

// closestFlag is the flag of fs closest to typed (at most two edits away,
// or typed is its start), or "".
func closestFlag(fs *pflag.FlagSet, typed string) string {
	best, bestDist := "", 3 // at most two edits away
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		d := editDistance(typed, f.Name)
		if strings.HasPrefix(f.Name, typed) && len(typed) >= 3 {
			d = min(d, 1)
		}
		if d < bestDist {
			best, bestDist = f.Name, d
		}
	})
	return best
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// flagParseError is every command's answer to a flag that does not parse:
// an unknown one with the closest the command has, a bad value named as
// typed ("--weight abc: want a whole number").
func flagParseError(cmd *cobra.Command, err error) error {
	var ive *pflag.InvalidValueError
	if errors.As(err, &ive) {
		f := ive.GetFlag()
		return flagValueError("--"+f.Name+" "+quoteArg(ive.GetValue()), f, errors.Unwrap(err))
	}
	return &usageError{msg: err.Error() + flagSuggestion(cmd, err)}
}

// unknownSubcommand is the RunE of a command that only holds others: with
// no argument it shows its help; an argument is an unknown command, said
// with the closest known one.
func unknownSubcommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return cmd.Help()
	}
	msg := fmt.Sprintf("unknown command %q", args[0])
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2 // cobra's default, which SuggestionsFor alone does not apply
	}
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += fmt.Sprintf(" (did you mean %s?)", strings.Join(s, " or "))
	}
	return usagef("%s; see %s --help", msg, cmd.CommandPath())
}

// checkCommandName refuses an unknown command before its flags are
// parsed: cobra would otherwise parse them as the root's, and answer
// "grackle frobnicate --endpoints x" with an unknown flag.
func checkCommandName(root *cobra.Command, name string) error {
	if name == "help" || name == "completion" || strings.HasPrefix(name, "__") {
		return nil // cobra's own, added when it runs
	}
	if c, _, err := root.Find([]string{name}); err == nil && c != root {
		return nil
	}
	return unknownSubcommand(root, []string{name})
}

// checkLeadingFlags checks the flags given before the command (grackle
// --endpoints a:7420 -q cluster status). Every client command takes them
// after it as well, but cobra finds the command by skipping flags it does
// not know as if each took a value: an unknown -x before the command
// would swallow the command's name and be reported as an unknown command.
// Known here: the root's flags and the client flags (those of any
// command group).
func checkLeadingFlags(root *cobra.Command, args []string) error {
	root.InitDefaultHelpFlag()
	root.InitDefaultVersionFlag()
	known := pflag.NewFlagSet("leading", pflag.ContinueOnError)
	known.AddFlagSet(root.PersistentFlags())
	known.AddFlagSet(root.Flags())
	for _, c := range root.Commands() {
		if c.PersistentFlags().Lookup(flagEndpoints) != nil {
			known.AddFlagSet(c.PersistentFlags())
			break
		}
	}
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if arg == "--" || arg == "-" {
			return nil
		}
		if !strings.HasPrefix(arg, "-") {
			return checkCommandName(root, arg)
		}
		var f *pflag.Flag
		if name, ok := strings.CutPrefix(arg, "--"); ok {
			name, _, hasValue := strings.Cut(name, "=")
			if f = known.Lookup(name); f == nil {
				err := &usageError{msg: fmt.Sprintf("unknown flag: --%s", name)}
				if s := closestFlag(known, name); s != "" {
					err.msg += " (did you mean --" + s + "?)"
				}
				return err
			}
			if !hasValue && f.NoOptDefVal == "" {
				i++ // its value
			}
			continue
		}
		// Shorthands: -q, -o json, -ojson, -qo json.
		for j := 1; j < len(arg); j++ {
			f = known.ShorthandLookup(arg[j : j+1])
			if f == nil {
				return &usageError{msg: fmt.Sprintf("unknown shorthand flag: '%s' in %s", arg[j:j+1], arg)}
			}
			if f.NoOptDefVal == "" {
				if j == len(arg)-1 {
					i++ // its value is the next word
				}
				break // the rest of the word is its value
			}
		}
	}
	return nil
}
