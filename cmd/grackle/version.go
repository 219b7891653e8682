package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/grackle-coord/grackle/version"
)

func (a *app) versionCmd() *cobra.Command {
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print this binary's version, VCS revision and Go version",
		Long: `Print this binary's version, VCS revision and Go version (also --version).
A running node reports its own in "grackle cluster status", /status and
the grackle_build_info metric.`,
		Args: positional(),
		RunE: func(*cobra.Command, []string) error {
			if jsonOut {
				b, _ := json.Marshal(version.Get())
				fmt.Fprintln(a.stdout, string(b))
				return nil
			}
			fmt.Fprintln(a.stdout, version.Get().String())
			return nil
		},
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	return cmd
}
