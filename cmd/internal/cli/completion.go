package cli

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/sqscope/sqscope/probe"
)

// Shells are the shells completion writes a script for.
var Shells = []string{"bash", "zsh", "fish", "powershell"}

// CompletionCommand is `sqscope completion SHELL`: a script that
// completes commands, flags and their values, with descriptions, by
// asking sqscope itself (so it never goes stale).
func CompletionCommand() *cobra.Command {
	c := Command("completion", "print a shell completion script: completion bash|zsh|fish|powershell",
		"completion bash|zsh|fish|powershell",
		"Print a script that completes sqscope's commands, flags and flag values, with\ndescriptions, in the shell named; it asks sqscope itself, so it never goes stale.",
		CompletionExamples)
	c.ValidArgs = Shells
	c.RunE = func(c *cobra.Command, args []string) error {
		if len(args) != 1 {
			return UsageErr("completion: name the shell, one of bash, zsh, fish or powershell (e.g. source <(sqscope completion bash))")
		}
		root, w := c.Root(), c.OutOrStdout()
		var err error
		switch args[0] {
		case "bash":
			err = root.GenBashCompletionV2(w, true)
		case "zsh":
			err = root.GenZshCompletion(w)
		case "fish":
			err = root.GenFishCompletion(w, true)
		case "powershell":
			err = root.GenPowerShellCompletionWithDesc(w)
		default:
			return UsageErr("completion: no script for %q: want bash, zsh, fish or powershell", args[0])
		}
		return err
	}
	return c
}

// PIDs makes flag name of c complete to the processes of the host that
// use verbs, each described by its name.
func PIDs(c *cobra.Command, name string) {
	must(c.RegisterFlagCompletionFunc(name, func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
		procs := probe.VerbsPIDs()
		var out []cobra.Completion
		for _, pid := range slices.Sorted(maps.Keys(procs)) {
			out = append(out, cobra.CompletionWithDesc(strconv.Itoa(pid), fmt.Sprintf("%s (uses verbs)", procs[pid])))
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}))
}

// Devices makes flag name of c complete to the simulated HCA and the
// host's RDMA devices.
func Devices(c *cobra.Command, name string) {
	must(c.RegisterFlagCompletionFunc(name, func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
		out := []cobra.Completion{cobra.CompletionWithDesc("sim", "the simulated mlx5-like HCA")}
		ents, _ := os.ReadDir("/sys/class/infiniband")
		for _, e := range ents {
			out = append(out, cobra.CompletionWithDesc(e.Name(), "RDMA device"))
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}))
}
