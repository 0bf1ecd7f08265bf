package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

// Root is the sqscope command with cmds under it, in the order help lists
// them: -V/--version, help on standard output, `help COMMAND` as
// `COMMAND --help`, and a bad flag or an unknown command a usage error.
func Root(version string, cmds []*cobra.Command) *cobra.Command {
	r := &cobra.Command{Use: "sqscope", Version: version, SilenceErrors: true, SilenceUsage: true,
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true}}
	r.Flags().BoolP("version", "V", false, "print the version")
	r.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return UsageErr("%v", FlagError(err)) })
	r.SetVersionTemplate("sqscope {{.Version}}\n")
	r.AddCommand(cmds...)
	r.SetHelpFunc(func(c *cobra.Command, _ []string) { topUsage(c.OutOrStdout(), cmds) })
	r.SetHelpCommand(&cobra.Command{Use: "help [COMMAND]", Short: "print a command's flags and examples",
		ValidArgsFunction: func(_ *cobra.Command, args []string, prefix string) ([]cobra.Completion, cobra.ShellCompDirective) {
			var names []cobra.Completion
			for _, c := range cmds {
				if len(args) == 0 && strings.HasPrefix(c.Name(), prefix) {
					names = append(names, cobra.CompletionWithDesc(c.Name(), c.Short))
				}
			}
			return names, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				topUsage(c.OutOrStdout(), cmds)
				return nil
			}
			sub, _, err := r.Find(args)
			if err != nil || sub == r {
				return UsageErr("help: unknown command %q (run 'sqscope --help')", strings.Join(args, " "))
			}
			return sub.Help()
		}})
	return r
}

// VersionCommand is `sqscope version`.
func VersionCommand(version string) *cobra.Command {
	c := Command("version", "print the version", "version", "Print sqscope's version.", "")
	c.RunE = func(c *cobra.Command, _ []string) error {
		_, err := fmt.Fprintln(c.OutOrStdout(), "sqscope", version)
		return err
	}
	return c
}

func topUsage(w io.Writer, cmds []*cobra.Command) {
	fmt.Fprintln(w, "usage: sqscope COMMAND [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "commands:")
	for _, c := range cmds {
		fmt.Fprintf(w, "  %-10s %s\n", c.Name(), c.Short)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'sqscope help COMMAND' (or 'sqscope COMMAND --help') for a command's flags and examples.")
}

// Run runs the command args name under root r: no command, or one r does
// not have, is a usage error.
func Run(ctx context.Context, r *cobra.Command, args []string, stdout, stderr io.Writer) error {
	r.SetArgs(args)
	r.SetErr(stderr)
	if len(args) == 0 {
		r.SetOut(stderr)
		r.HelpFunc()(r, nil)
		return &ExitError{Code: 2, Err: errors.New("no command given")}
	}
	r.SetOut(stdout)
	if name := args[0]; name != "help" && !strings.HasPrefix(name, "-") && !strings.HasPrefix(name, cobra.ShellCompRequestCmd) {
		if c, _, err := r.Find(args[:1]); err != nil || c == r {
			return UsageErr("unknown command %q (run 'sqscope --help')", name)
		}
	}
	return r.ExecuteContext(ctx)
}
