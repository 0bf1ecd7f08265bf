package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

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

// workloadCmd is `sqscope workload`; its flags keep perftest's names
// where perftest has the flag (-s, -I, -Q, -t, -l, -n, -q/--qp, -c,
// --out_json).
func workloadCmd() *cobra.Command {
	c := cli.Command("workload", "drive inline/unsignaled send traffic on the simulated HCA or a verbs device", "workload [flags]",
		"Drive send traffic and print what happened to each send queue. On the\nsimulated HCA (the default) the counters are the HCA's ground truth.",
		cli.WorkloadExamples)
	fs, f := workloadFlagSet(c.Flags())
	cli.Values(c, "connection", "RC\treliable connected", "UD\tunreliable datagram")
	cli.Values(c, "api", "post_send\tibv_post_send", "wr\tibv_wr_start .. ibv_wr_complete", "direct\tdirect verbs (simulated HCA)")
	cli.Values(c, "opcode", workload.OpcodeNames()...)
	cli.Values(c, "fault", "never-signal", "lazy-poll=", "inline-too-big", "too-many-sge", "bad-opcode", "post-before-rts", "cq-overrun", "rq-starve")
	cli.Devices(c, "ib-dev")
	c.ValidArgsFunction = cobra.NoFileCompletions
	c.RunE = func(c *cobra.Command, args []string) error {
		if err := f.check(fs, args); err != nil {
			return err
		}
		return runWorkload(c.Context(), f, c.OutOrStdout())
	}
	return c
}

// workloadFlagSet adds the workload's flags to fs.
func workloadFlagSet(fs *pflag.FlagSet) (*pflag.FlagSet, *workloadFlags) {
	f := &workloadFlags{cfg: workload.Defaults()}
	c := &f.cfg
	cli.Aliases(fs, map[string]string{"qps": "qp", "out_json": "json", "out_json_file": "json-out"})
	fs.StringVarP(&c.Device, "ib-dev", "d", c.Device, "the `DEVICE`: sim (simulated mlx5-like HCA) or a verbs device name")
	fs.IntVarP(&c.GIDIndex, "gid-index", "x", c.GIDIndex, "`GID` index on RoCE (-1: choose RoCE v2)")
	fs.IntVar(&c.Port, "ib-port", c.Port, "device `PORT`")
	cli.UintVarP(fs, &c.Size, "size", "s", c.Size, "payload bytes per WR")
	cli.UintVarP(fs, &c.InlineSize, "inline_size", "I", c.InlineSize, "max inline data asked for; WRs of -s <= -I are posted inline")
	cli.UintVarP(fs, &c.CQMod, "cq-mod", "Q", c.CQMod, "signal every Nth WR (capped to -t when not given)")
	cli.UintVarP(fs, &c.TxDepth, "tx-depth", "t", c.TxDepth, "SQ depth asked for, and the outstanding-WR limit")
	cli.UintVarP(fs, &c.PostList, "post_list", "l", c.PostList, "WRs per post call (one doorbell)")
	fs.Uint64VarP(&c.Iters, "iters", "n", c.Iters, "`N` WRs per QP")
	durflag.VarP(fs, &c.Duration, "duration", "D", 0, "run for `DURATION` (e.g. 30 or 30s) instead of -n")
	fs.IntVarP(&c.QPs, "qp", "q", c.QPs, "`N` QPs, one thread each unless --threads (also --qps)")
	fs.IntVar(&c.Threads, "threads", 0, "spread the QPs over `N` threads, each posting to its QPs in turn (0: one per QP)")
	fs.BoolVar(&c.SharedCQ, "shared-cq", false, "one send CQ per thread, shared by its QPs (--cq-depth sets its entries), on the simulated HCA or a device (within its max_cqe)")
	fs.BoolVar(&c.SRQ, "srq", false, "SENDs to receivers that take their receives from one shared receive queue per thread (implies --receiver; on a device the peers of the thread's QPs share it)")
	fs.StringVarP(&f.conn, "connection", "c", "RC", "the QP `TYPE`: RC or UD")
	fs.StringVar(&f.opcode, "opcode", "send", "the `OPCODE`: "+strings.Join(workload.OpcodeNames(), ", ")+"; several, comma-separated, are posted in turn")
	fs.BoolVar(&c.CQEx, "cq-ex", false, "create the CQ with ibv_create_cq_ex and poll it with ibv_start_poll/ibv_next_poll")
	cli.UintVarP(fs, &c.CQDepth, "cq-depth", "", 0, "entries to ask for each send CQ (0: room for every WR the SQ holds)")
	fs.StringVar(&c.API, "api", c.API, "the `API`: post_send, wr (ibv_wr_start..ibv_wr_complete) or direct (the simulated HCA builds the WQEs without ibv_post_send, as direct-verbs applications do)")
	cli.UintVarP(fs, &c.PollBatch, "poll-batch", "", c.PollBatch, "work completions per ibv_poll_cq")
	fs.BoolVar(&c.ThreadChurn, "thread-churn", false, "start and end threads beside the traffic, about a thousand a second (as a process whose threads come and go while a tracer attaches)")
	fs.Uint64Var(&c.Rate, "rate", 0, "cap the post rate, `WR/s` per QP (0: none)")
	fs.BoolVar(&c.SigAll, "sig-all", false, "create QPs with sq_sig_all=1")
	fs.BoolVar(&c.Receiver, "receiver", false, "on the simulator, give each RC QP a receiving peer whose receives its SENDs take (devices always have one)")
	cli.UintVarP(fs, &c.RNRRetry, "rnr-retry", "", c.RNRRetry, "the sender's rnr_retry with a receiver: RNR retries before IBV_WC_RNR_RETRY_EXC_ERR, 7 forever")
	fs.StringVar(&f.fault, "fault", "", "reproduce a bug, the `FAULT`: never-signal, lazy-poll=N, inline-too-big, too-many-sge, bad-opcode, post-before-rts, cq-overrun (with --cq-depth), rq-starve")
	durflag.Var(fs, &c.FaultAfter, "fault-after", 0, "start the fault `DURATION` (e.g. 60 or 1m) into the run")
	fs.IntVar(&c.FaultQP, "fault-qp", -1, "apply the fault to QP `INDEX` only (-1: all)")
	fs.BoolVar(&f.json, "json", false, "print the result as JSON (also perftest's --out_json)")
	fs.StringVar(&f.jsonOut, "json-out", "", "also write the JSON to `FILE` (also perftest's --out_json_file)")
	fs.StringVar(&c.ReadyFile, "ready-file", "", "write `FILE` once the QPs exist, before traffic")
	fs.BoolVar(&c.WaitSignal, "wait-signal", false, "block before traffic until SIGUSR1")
	fs.BoolVar(&f.deterministic, "sim-deterministic", false, "simulated NIC: CQEs visible at the doorbell")
	fs.Func("sim-nic", "simulated `NIC` timing, e.g. link-gbps=0.25,rtt-ns=20000 (default "+c.Sim.String()+")", func(s string) (err error) {
		c.Sim, err = nicmodel.Parse(s, c.Sim)
		return err
	})
	return fs, f
}

// parseWorkload turns arguments into a validated workload.Config.
func parseWorkload(args []string) (*workloadFlags, error) {
	fs, f := workloadFlagSet(pflag.NewFlagSet("workload", pflag.ContinueOnError))
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		return nil, cli.UsageErr("workload: %v", cli.FlagError(err))
	}
	return f, f.check(fs, fs.Args())
}

// check validates the flags fs parsed, args the arguments after them,
// into f's workload.Config.
func (f *workloadFlags) check(fs *pflag.FlagSet, args []string) error {
	if len(args) > 0 {
		return cli.UsageErr("workload: unexpected argument %q", args[0])
	}
	c := &f.cfg
	qt, err := verbs.ParseQPType(f.conn)
	if err != nil {
		return cli.UsageErr("workload: --connection: %v", err)
	}
	c.Conn = qt
	if c.Opcodes, err = workload.ParseOpcodes(f.opcode); err != nil {
		return cli.UsageErr("workload: %v", err)
	}
	if f.fault != "" {
		c.Fault, c.LazyPoll, err = workload.ParseFault(f.fault)
		if err != nil {
			return cli.UsageErr("workload: %v", err)
		}
	}
	if c.Duration > 0 {
		if fs.Changed("iters") {
			return cli.UsageErr("workload: give -n/--iters or -D/--duration, not both")
		}
		c.Iters = 0
	}
	c.Sim.Deterministic = f.deterministic
	if err := c.Validate(fs.Changed("cq-mod")); err != nil {
		return cli.UsageErr("workload: %v", err)
	}
	return nil
}

func runWorkload(ctx context.Context, f *workloadFlags, stdout io.Writer) error {
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
