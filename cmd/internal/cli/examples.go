package cli

// The examples each command's --help ends with.

// ExportExamples are `sqscope export --help`'s examples.
const ExportExamples = `
EXAMPLES
  sqscope export --format perfetto run.sqscope -o run.pftrace
        Perfetto's native trace (ui.perfetto.dev, trace_processor)
  sqscope export --qp 0x1c2 --from 8 --to 9.5 run.sqscope -o qp.json
        one QP, from 8 to 9.5 s after the start
  sqscope export --format perfetto --rates --pid 4242 --from 10:02:00 run.sqscope -o run.pftrace
        one process from a time of day on, with per-QP rate counters
`

// RecordExamples are `sqscope record --help`'s examples.
const RecordExamples = `
EXAMPLES
  sqscope record -o run.sqscope --workload -- -s 64 -I 64 -Q 16 -n 100000
        record the built-in workload
  sqscope record -o perf.sqscope -c "ib_send_bw -d rxe0 -x 1 -s 64 -Q 16 -n 5000 127.0.0.1"
        record perftest's client
  sqscope report run.sqscope
        read it back later, or on another machine
  sqscope record -o run.sqscope --html run.html --workload -- -t 128 --fault never-signal -n 10000
        also write the page report --html makes of the recording, with its advice
  sqscope record --flight 10s --trigger enomem --trigger signal -o flight/ -p 1234
        keep the last 10 s in memory; on a failed post or SIGUSR1 write them and
        the 5 s after to a new file in flight/
`

// ReportExamples are `sqscope report --help`'s examples.
const ReportExamples = `
EXAMPLES
  sqscope report run.sqscope
        per-QP summary, PCIe savings and diagnoses of a recording
  sqscope report run.sqscope --json | jq '.qps[] | {qp_num, wrs, doorbells, bf_writes}'
        the same as one JSON object; counters use the workload's names
  sqscope report --html -o run.html run.sqscope
        one self-contained page (no network) with every QP, plots and diagnoses
  sqscope report --mlx5-shut-up-bf run.sqscope
        model a target that ran with MLX5_SHUT_UP_BF=1 (no BlueFlame)
`

// TopExamples are `sqscope top --help`'s examples.
const TopExamples = `
EXAMPLES
  sqscope top --workload -- --qps 4 -s 64 -I 64 -Q 16 -D 60 --rate 5000
        watch the built-in workload's send queues live
  sqscope top -c "ib_write_bw -d rxe0 -x 1 -s 64 -Q 16 -D 30 127.0.0.1"
        watch perftest
  sqscope top -p 4242 | cat
        without a terminal: a text report every second
  sqscope top
        every process of the host that uses verbs (as -a)
KEYS
  arrows or j/k select, Enter detail, o/O sort, p pause, r reset, s save, / filter, ? help, q quit
`

// TraceExamples are `sqscope trace --help`'s examples.
const TraceExamples = `
EXAMPLES
  sqscope trace --workload -- -s 64 -I 64 -Q 16 -n 100000
        trace the built-in workload on the simulated HCA
  sqscope trace -c "ib_write_bw -d rxe0 -x 1 -s 64 -Q 16 127.0.0.1"
        start perftest and trace it
  sqscope trace -p 4242 -i 1
        trace a running process, a summary every second
  sqscope trace --json --workload -- --fault never-signal -n 10000
        the per-QP summary as JSON
  sqscope trace --html run.html -p 4242
        also one self-contained page of what was traced, as report --html writes
`

// WorkloadExamples are `sqscope workload --help`'s examples.
const WorkloadExamples = `
EXAMPLES
  sqscope workload -s 64 -I 64 -Q 16 -t 128 -n 1000000
        inline 64 B SENDs, a CQE every 16th WR, on the simulated HCA
  sqscope workload -s 64 -I 64 -Q 16 -l 16 --api wr --json
        batches of 16 WRs per doorbell through ibv_wr_*, JSON per QP
  sqscope workload -t 128 --fault never-signal -n 10000
        reproduce SQ overflow: no WR is ever signaled
  sqscope workload --qps 4 -s 64 -I 64 -Q 16 -D 30 --rate 20000 --fault never-signal --fault-after 10 --fault-qp 2
        four healthy QPs; after 10 s QP index 2 stops signaling and overflows
  sqscope workload -t 128 -Q 1 --cq-depth 32 --fault cq-overrun -n 2000
        a send CQ smaller than the signaled WRs outstanding overruns
  sqscope workload --qps 1024 --threads 16 --shared-cq --srq -s 64 -I 64 -Q 16 -n 2000
        1,024 QPs driven by 16 threads, each polling one CQ and refilling one SRQ
  sqscope workload -d rxe0 -x 1 -s 32 -I 32 -Q 16
        the same traffic on a Soft-RoCE device, RoCE v2 GID index 1
  sqscope workload -d rxe0 -x 1 --qps 16 --threads 2 --shared-cq --srq -Q 4 -n 400
        two threads on a device, each polling one send CQ and refilling one SRQ
`

// PSExamples are ps's.
const PSExamples = `
EXAMPLES
  sudo sqscope ps
        every process using verbs, its devices, its QPs as the kernel lists them, how sqscope would trace it
  sudo sqscope ps --json | jq '.[] | {pid, comm, qps: [.qps[].qp_num]}'
        the same as one JSON array
  sudo sqscope ps -v
        also scan each process's memory as 'trace -p' would: the verbs contexts and QPs found there
`

// CompletionExamples are `sqscope completion --help`'s examples.
const CompletionExamples = `
EXAMPLES
  source <(sqscope completion bash)
        complete in this bash (put it in ~/.bashrc to keep it)
  sqscope completion zsh > "${fpath[1]}/_sqscope"
        install for zsh (compinit must be on)
  sqscope completion fish > ~/.config/fish/completions/sqscope.fish
        install for fish
  sqscope completion powershell | Out-String | Invoke-Expression
        complete in this PowerShell
`
