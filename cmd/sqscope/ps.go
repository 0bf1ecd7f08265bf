package main

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/sqscope/sqscope/cmd/internal/cli"
	"github.com/sqscope/sqscope/hostps"
	"github.com/sqscope/sqscope/probe"
	"github.com/sqscope/sqscope/session"
)

func psCmd() *cobra.Command {
	var asJSON bool
	c := cli.Command("ps", "list the processes that use verbs, their QPs as the kernel lists them, and how each would be traced", "ps [flags]",
		"List the processes of the host that use verbs (they map libibverbs, or run a binary\nwith the simulated HCA): their RDMA devices, their QPs as the kernel lists them\n(RDMA netlink, as 'rdma res show qp'; number in hex and decimal), and how\n'sqscope trace -p PID' would reach their data path. Reading other processes'\nmemory maps and files needs root.",
		cli.PSExamples)
	var verbose bool
	var scan session.AttachFlags
	c.Flags().BoolVar(&asJSON, "json", false, "print one JSON array instead of text")
	cli.RegisterVerbose(c.Flags(), &verbose)
	c.Flags().Lookup("verbose").Usage = "also scan each process's memory as 'trace -p' would, and list the verbs contexts and QPs it finds there, and the kernel's QPs it does not (the process runs on)"
	scan.RegisterScan(c.Flags(), "-v: ")
	c.ValidArgsFunction = cobra.NoFileCompletions
	c.RunE = func(c *cobra.Command, args []string) error {
		if len(args) > 0 {
			return cli.UsageErr("ps: takes no arguments, got %q", strings.Join(args, " "))
		}
		procs, _ := probe.VerbsProcs(scan.DebugDirs)
		if verbose {
			b, err := scan.Bounds()
			if err != nil {
				return cli.UsageErr("ps: %v", err)
			}
			for i := range procs {
				probe.ScanVerbsProc(&procs[i], b)
			}
		}
		if asJSON {
			return cli.WriteJSON(c.OutOrStdout(), procs, true)
		}
		return hostps.WriteText(c.OutOrStdout(), procs)
	}
	return c
}
