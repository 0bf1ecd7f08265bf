package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// Bad workload flags get one clear line and exit status 2.
func TestWorkloadBadFlags(t *testing.T) {
	tests := []struct {
		name string
		args string
		want string
	}{
		{"size 0 with inline", "-s 0 -I 64", "an inline WR needs a payload"},
		{"depth 0", "-t 0", "-t/--tx-depth must be at least 1"},
		{"-Q larger than depth", "-Q 256 -t 128", "larger than -t/--tx-depth"},
		{"a post list the flow control stalls on", "-Q 7 -l 11 -t 16", "needs -t/--tx-depth >= 17"},
		{"unknown device", "-d mlx5_9", `no RDMA device "mlx5_9"`},
		{"unknown fault", "--fault explode", `unknown fault "explode"`},
		{"lazy-poll without N", "--fault lazy-poll", "lazy-poll=N"},
		{"fault-qp out of range", "--fault never-signal --fault-qp 3", "--fault-qp 3 out of range"},
		{"bad connection", "--connection XRC", "want RC or UD"},
		{"UD write", "--connection UD --opcode write", "UD has no RDMA WRITE"},
		{"not a number", "-s lots", "want a non-negative integer"},
		{"unknown flag", "--turbo", "workload: unknown flag: --turbo"},
		{"stray argument", "now", `unexpected argument "now"`},
		{"too many QPs", "--qps 4097", "--qps 4097 out of range 1..4096"},
		{"more threads than QPs", "--qps 4 --threads 5", "--threads 5 out of range 1..4"},
		{"srq with writes", "--srq --opcode write", "--srq needs RC and --opcode send"},
		{"srq on UD", "--srq --connection UD", "--srq needs RC"},
		{"negative fault-after", "--fault never-signal --fault-after -1", `invalid value "-1" for --fault-after: want a duration`},
		{"negative duration", "-D -2s", `invalid value "-2s" for -D/--duration: want a duration`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), append([]string{"workload"}, strings.Fields(tc.args)...), &stdout, &stderr)
			if code := exitCode(err); code != 2 || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("exit %d, error %v; want exit 2 and one line with %q", code, err, tc.want)
			}
			if stdout.Len() != 0 || stderr.Len() != 0 {
				t.Fatalf("printed %q / %q besides the error", stdout.String(), stderr.String())
			}
		})
	}
}

// The acceptance runs of the workload command itself.
func TestWorkloadCommand(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), strings.Fields("workload -s 64 -I 64 -Q 16 -t 128 -n 1000000 --json"), &out, &out); err != nil {
		t.Fatal(err)
	}
	var qps []map[string]any
	if err := json.Unmarshal(out.Bytes(), &qps); err != nil || len(qps) != 1 {
		t.Fatalf("%v: %s", err, out.String())
	}
	q := qps[0]
	f := func(k string) float64 { return q[k].(float64) }
	if f("wrs") != 1e6 || f("inline") != f("wrs") || f("signaled") != f("wrs")/16 || f("cqe_writes") != f("signaled") ||
		f("bf_writes") != f("post_calls") || f("enomem_sq_full")+f("enomem_inline")+f("enomem_sge")+f("einval") != 0 {
		t.Fatalf("%v", q)
	}
	app := q["app"].(map[string]any)
	if rate, secs := app["wrs_per_s"].(float64), app["seconds"].(float64); secs <= 0 || math.Abs(rate-app["wrs"].(float64)/secs) > 1e-6*rate {
		t.Errorf("the application's WR/s %v over %v s, want its WRs over its seconds", app["wrs_per_s"], secs)
	}

	out.Reset()
	if err := run(context.Background(), strings.Fields("workload -t 128 --fault never-signal -n 10000"), &out, &out); err != nil {
		t.Fatalf("never-signal must end normally: %v", err)
	}
	if !strings.Contains(out.String(), "SQ OVERFLOW") {
		t.Fatalf("summary does not say the SQ overflowed:\n%s", out.String())
	}
	out.Reset()
	if err := run(context.Background(), strings.Fields("workload -t 128 --fault never-signal -n 10000 --json"), &out, &out); err != nil {
		t.Fatal(err)
	}
	json.Unmarshal(out.Bytes(), &qps)
	q = qps[0]
	if f("wrs") != f("max_send_wr") || f("enomem_sq_full") != 10000-f("wrs") {
		t.Fatalf("%v", q)
	}
}

// perftest's names for the same knobs, and limits named with exit status 2.
func TestWorkloadPerftestNamesAndLimits(t *testing.T) {
	for _, tc := range []struct {
		args string
		code int
		want string
	}{
		{"-c UD -q 2 -n 100", 0, "UD SEND, api post_send, 2 QP(s)"},
		{"--out_json -n 10", 0, `"qp_num"`},
		{"-n 100 -D 0.5", 2, "give -n/--iters or -D/--duration, not both"},
		{"-I 829 -n 10", 2, "-I/--inline_size 829: the simulated HCA takes at most 828 on this RC QP"},
		{"-I 957 -c UD -n 10", 2, "the simulated HCA takes at most 956 on this UD QP"},
		{"-t 100000 -n 10", 2, "-t/--tx-depth 100000: the simulated HCA takes 1 to 32768"},
		{"-s 99999999999", 2, "at most 4294967295"},
	} {
		t.Run(tc.args, func(t *testing.T) {
			var out, errb bytes.Buffer
			err := run(context.Background(), append([]string{"workload"}, strings.Fields(tc.args)...), &out, &errb)
			got := out.String()
			if err != nil {
				got = err.Error()
			}
			if exitCode(err) != tc.code || !strings.Contains(got, tc.want) {
				t.Fatalf("exit %d, %q; want exit %d and %q", exitCode(err), got, tc.code, tc.want)
			}
		})
	}
}
