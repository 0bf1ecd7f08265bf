package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/sqscope/sqscope/cmd/internal/cli"
	"github.com/sqscope/sqscope/internal/durflag"
	"github.com/sqscope/sqscope/internal/outfile"
	"github.com/sqscope/sqscope/verbs"
	"github.com/sqscope/sqscope/verbs/nicmodel"
	"github.com/sqscope/sqscope/workload"
)

type workloadFlags struct {
	cfg           workload.Config
	conn, opcode  string
	fault         string
	json          bool
	jsonOut       string
	deterministic bool
}

func newWorkloadFlags(help io.Writer) (*flag.FlagSet, *workloadFlags) {
	f := &workloadFlags{cfg: workload.Defaults()}
	fs := cli.CommandFlags("workload", "workload [flags]",
		"Drive send traffic and print what happened to each send queue. On the\nsimulated HCA (the default) the counters are the HCA's ground truth.",
		cli.WorkloadExamples, help)
	c := &f.cfg
	both := func(short, long string, fn func(name string)) {
		fn(short)
		fn(long)
	}
	both("d", "ib-dev", func(n string) {
		fs.StringVar(&c.Device, n, c.Device, "device: sim (simulated mlx5-like HCA) or a verbs device name")
	})
	both("x", "gid-index", func(n string) { fs.IntVar(&c.GIDIndex, n, c.GIDIndex, "GID index on RoCE (-1: choose RoCE v2)") })
	fs.IntVar(&c.Port, "ib-port", c.Port, "device port")
	both("s", "size", func(n string) { cli.UintVar(fs, &c.Size, n, c.Size, "payload bytes per WR") })
	both("I", "inline_size", func(n string) {
		cli.UintVar(fs, &c.InlineSize, n, c.InlineSize, "max inline data asked for; WRs of -s <= -I are posted inline")
	})
	both("Q", "cq-mod", func(n string) {
		cli.UintVar(fs, &c.CQMod, n, c.CQMod, "signal every Nth WR (capped to -t when not given)")
	})
	both("t", "tx-depth", func(n string) {
		cli.UintVar(fs, &c.TxDepth, n, c.TxDepth, "SQ depth asked for, and the outstanding-WR limit")
	})
	both("l", "post_list", func(n string) { cli.UintVar(fs, &c.PostList, n, c.PostList, "WRs per post call (one doorbell)") })
	both("n", "iters", func(n string) { fs.Uint64Var(&c.Iters, n, c.Iters, "WRs per QP") })
	both("D", "duration", func(n string) {
		durflag.Var(fs, &c.Duration, n, 0, "run for `DURATION` (e.g. 30 or 30s) instead of -n")
	})
	for _, n := range []string{"q", "qp", "qps"} { // perftest's -q/--qp
		fs.IntVar(&c.QPs, n, c.QPs, "QPs, one thread each unless --threads")
	}
	fs.IntVar(&c.Threads, "threads", 0, "spread the QPs over N threads, each posting to its QPs in turn (0: one per QP)")
	fs.BoolVar(&c.SharedCQ, "shared-cq", false, "one send CQ per thread, shared by its QPs (--cq-depth sets its entries), on the simulated HCA or a device (within its max_cqe)")
	fs.BoolVar(&c.SRQ, "srq", false, "SENDs to receivers that take their receives from one shared receive queue per thread (implies --receiver; on a device the peers of the thread's QPs share it)")
	both("c", "connection", func(n string) { fs.StringVar(&f.conn, n, "RC", "RC or UD") })
	fs.StringVar(&f.opcode, "opcode", "send", strings.Join(workload.OpcodeNames(), ", ")+"; several, comma-separated, are posted in turn")
	fs.BoolVar(&c.CQEx, "cq-ex", false, "create the CQ with ibv_create_cq_ex and poll it with ibv_start_poll/ibv_next_poll")
	cli.UintVar(fs, &c.CQDepth, "cq-depth", 0, "entries to ask for each send CQ (0: room for every WR the SQ holds)")
	fs.StringVar(&c.API, "api", c.API, "post_send, wr (ibv_wr_start..ibv_wr_complete) or direct (the simulated HCA builds the WQEs without ibv_post_send, as direct-verbs applications do)")
	cli.UintVar(fs, &c.PollBatch, "poll-batch", c.PollBatch, "work completions per ibv_poll_cq")
	fs.BoolVar(&c.ThreadChurn, "thread-churn", false, "start and end threads beside the traffic, about a thousand a second (as a process whose threads come and go while a tracer attaches)")
	fs.Uint64Var(&c.Rate, "rate", 0, "cap the post rate, WR/s per QP (0: none)")
	fs.BoolVar(&c.SigAll, "sig-all", false, "create QPs with sq_sig_all=1")
	fs.BoolVar(&c.Receiver, "receiver", false, "on the simulator, give each RC QP a receiving peer whose receives its SENDs take (devices always have one)")
	cli.UintVar(fs, &c.RNRRetry, "rnr-retry", c.RNRRetry, "the sender's rnr_retry with a receiver: RNR retries before IBV_WC_RNR_RETRY_EXC_ERR, 7 forever")
	fs.StringVar(&f.fault, "fault", "", "reproduce a bug: never-signal, lazy-poll=N, inline-too-big, too-many-sge, bad-opcode, post-before-rts, cq-overrun (with --cq-depth), rq-starve")
	durflag.Var(fs, &c.FaultAfter, "fault-after", 0, "start the fault `DURATION` (e.g. 60 or 1m) into the run")
	fs.IntVar(&c.FaultQP, "fault-qp", -1, "apply the fault to this QP index only (-1: all)")
	for _, n := range []string{"json", "out_json"} { // perftest's --out_json
		fs.BoolVar(&f.json, n, false, "print one JSON object per QP")
	}
	for _, n := range []string{"json-out", "out_json_file"} {
		fs.StringVar(&f.jsonOut, n, "", "also write the JSON to this file")
	}
	fs.StringVar(&c.ReadyFile, "ready-file", "", "write this file once the QPs exist, before traffic")
	fs.BoolVar(&c.WaitSignal, "wait-signal", false, "block before traffic until SIGUSR1")
	fs.BoolVar(&f.deterministic, "sim-deterministic", false, "simulated NIC: CQEs visible at the doorbell")
	fs.Func("sim-nic", "simulated NIC timing, e.g. link-gbps=0.25,rtt-ns=20000 (default "+c.Sim.String()+")", func(s string) (err error) {
		c.Sim, err = nicmodel.Parse(s, c.Sim)
		return err
	})
	return fs, f
}

// parseWorkload turns arguments into a validated workload.Config.
func parseWorkload(args []string, help io.Writer) (*workloadFlags, error) {
	fs, f := newWorkloadFlags(help)
	if err := cli.ParseQuiet(fs, help, func() error { return fs.Parse(args) }); err != nil {
		if err == flag.ErrHelp {
			return nil, err
		}
		return nil, cli.UsageErr("workload: %v", err)
	}
	if fs.NArg() > 0 {
		return nil, cli.UsageErr("workload: unexpected argument %q", fs.Arg(0))
	}
	c := &f.cfg
	qt, err := verbs.ParseQPType(f.conn)
	if err != nil {
		return nil, cli.UsageErr("workload: --connection: %v", err)
	}
	c.Conn = qt
	if c.Opcodes, err = workload.ParseOpcodes(f.opcode); err != nil {
		return nil, cli.UsageErr("workload: %v", err)
	}
	if f.fault != "" {
		c.Fault, c.LazyPoll, err = workload.ParseFault(f.fault)
		if err != nil {
			return nil, cli.UsageErr("workload: %v", err)
		}
	}
	if c.Duration > 0 {
		if cli.FlagGiven(fs, "n", "iters") {
			return nil, cli.UsageErr("workload: give -n/--iters or -D/--duration, not both")
		}
		c.Iters = 0
	}
	c.Sim.Deterministic = f.deterministic
	if err := c.Validate(cli.FlagGiven(fs, "Q", "cq-mod")); err != nil {
		return nil, cli.UsageErr("workload: %v", err)
	}
	return f, nil
}

func runWorkload(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := parseWorkload(args, stdout)
	if err != nil {
		return err
	}
	res, err := workload.Run(ctx, f.cfg)
	if err != nil {
		var le *verbs.LimitError
		if errors.Is(err, verbs.ErrNoDevice) || errors.As(err, &le) {
			return cli.UsageErr("%v", err)
		}
		return err
	}
	if f.jsonOut != "" {
		out, err := outfile.Create(f.jsonOut, 0o644, nil, false, true)
		if err == nil {
			defer out.Discard()
			if err = res.WriteJSON(out); err == nil {
				err = out.Commit()
			}
		}
		if err != nil {
			return fmt.Errorf("writing --json-out: %w", err)
		}
	}
	if f.json {
		return res.WriteJSON(stdout)
	}
	res.WriteText(stdout)
	return nil
}
