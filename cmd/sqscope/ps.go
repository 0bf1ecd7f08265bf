package main

import (
	"context"
	"io"
	"strings"

	"github.com/sqscope/sqscope/cmd/internal/cli"
	"github.com/sqscope/sqscope/hostps"
	"github.com/sqscope/sqscope/probe"
	"github.com/sqscope/sqscope/session"
)

func runPS(_ context.Context, args []string, stdout, _ io.Writer) error {
	fs := cli.CommandFlags("ps", "ps [flags]",
		"List the processes of the host that use verbs (they map libibverbs, or run a binary\nwith the simulated HCA): their RDMA devices, their QPs as the kernel lists them\n(RDMA netlink, as 'rdma res show qp'; number in hex and decimal), and how\n'sqscope trace -p PID' would reach their data path. Reading other processes'\nmemory maps and files needs root.",
		cli.PSExamples, stdout)
	asJSON := fs.Bool("json", false, "print one JSON array instead of text")
	var debug []string
	session.DebugDirFlag(fs, &debug)
	pos, err := cli.Positional(fs, "ps", args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return cli.UsageErr("ps: takes no arguments, got %q", strings.Join(pos, " "))
	}
	procs, _ := probe.VerbsProcs(debug)
	if *asJSON {
		return cli.WriteJSON(stdout, procs, true)
	}
	return hostps.WriteText(stdout, procs)
}
