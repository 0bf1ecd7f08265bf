package report

import (
	"fmt"
	"io"
	"strings"
	"syscall"

	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/trace"
)

// writeTrace writes what is said of the trace as a whole, before its QPs:
// its events, losses and target, how and where it ended, the memory scans,
// its processes and its probes.
func writeTrace(w io.Writer, s *analyzer.Snapshot, verbose bool) {
	secs := float64(s.LastNS-s.FirstNS) / 1e9
	fmt.Fprintf(w, "sqscope: %d events over %.3f s, %d QP(s)", s.Events, secs, len(s.QPs))
	if s.Lost > 0 {
		fmt.Fprintf(w, ", LOST %d EVENTS: counts below are lower bounds", s.Lost)
	} else {
		fmt.Fprint(w, ", 0 lost events")
	}
	switch {
	case s.Exited && s.ExitSignal != 0:
		fmt.Fprintf(w, ", target killed by signal %d (%s)", s.ExitSignal, syscall.Signal(s.ExitSignal))
	case s.Exited:
		fmt.Fprintf(w, ", target exited with code %d", s.ExitCode)
	}
	fmt.Fprintln(w)
	if s.Ended != "" {
		fmt.Fprintf(w, "  trace ended: %s\n", s.Ended)
	}
	writeEnding(w, s)
	if c := PollCuts(s.Total.Cuts); c != "" {
		fmt.Fprintf(w, "  cut by the tracer's bounds, in all: %s (each CQ's are on its line)\n", c)
	}
	if c := s.SQModelCuts; c != nil {
		fmt.Fprintf(w, "  cut by the kernel's send-queue model, in all: %d completions of polls past the %d it reads per poll (a later completion of the same QP retired their WRs), %d QPs it had no room for (their occupancy not measured)\n",
			c.CQEsUnread, trace.SigWCs, c.QPsNotKept)
	}
	writeSentinel(w, s.Sentinel, s.FirstNS)
	for i := range s.Scans {
		writeScan(w, &s.Scans[i], s.Processes)
	}
	writeProcs(w, s.Processes)
	writeProbes(w, s.Attach, verbose)
}

// writeEnding writes where the trace was cut and the completions that
// matched no post seen, in total (each QP's and CQ's own are on its lines).
func writeEnding(w io.Writer, s *analyzer.Snapshot) {
	if c := s.Cut; c != nil {
		at := "at the stop"
		if c.AtNS >= s.FirstNS && s.FirstNS != 0 {
			at = fmt.Sprintf("%.6f s into the trace", float64(c.AtNS-s.FirstNS)/1e9)
		}
		fmt.Fprintf(w, "  trace cut %s, every probe at once (the target ran on): posts are in if they began before it, polls if they returned before it", at)
		if c.WRsOutstanding != nil {
			fmt.Fprintf(w, "; %d WRs posted before it not seen retired (their completions came after)", *c.WRsOutstanding)
		} else {
			fmt.Fprint(w, "; the WRs it left outstanding are not known in counters mode (no occupancy)")
		}
		fmt.Fprintf(w, "; %d posts in flight at it returned too late to be recorded\n", c.PostsInFlightUnseen)
	}
	var parts []string
	var total uint64
	for _, q := range s.QPs {
		if q.UnmatchedCQEs > 0 {
			parts = append(parts, fmt.Sprintf("QP %#x: %d", q.QPNum, q.UnmatchedCQEs))
			total += q.UnmatchedCQEs
		}
	}
	for _, c := range s.CQs {
		if c.UnmatchedExCQEs > 0 {
			parts = append(parts, fmt.Sprintf("CQ %#x (extended polls): %d", c.CQ, c.UnmatchedExCQEs))
			total += c.UnmatchedExCQEs
		}
	}
	if total == 0 && (s.Cut == nil || s.Total.CountersOnly) {
		return // said only when there are some, or to show a cut lost none
	}
	fmt.Fprintf(w, "  completions that matched no post seen: %d", total)
	if len(parts) > 0 {
		fmt.Fprintf(w, " (%s)", strings.Join(parts, ", "))
	}
	fmt.Fprintln(w)
}

// writeScan says what the memory scan of a running process read.
func writeScan(w io.Writer, sc *trace.Scan, procs []analyzer.Process) {
	who := fmt.Sprintf("process %d", sc.PID)
	for _, p := range procs {
		if p.PID == sc.PID && p.Comm != "" {
			who += " (" + p.Comm + ")"
			break
		}
	}
	fmt.Fprintf(w, "  memory scan of %s: %.1f MiB of %d mappings in %.3f s (%.2f GiB/s), %d verbs context(s), %d QP(s)", who,
		float64(sc.Bytes)/(1<<20), sc.Mappings, float64(sc.DurationNS)/1e9,
		float64(sc.Bytes)/(1<<30)/max(float64(sc.DurationNS)/1e9, 1e-9), sc.Contexts, sc.QPs)
	if sc.StopNS > 0 {
		fmt.Fprintf(w, "; stopped %.3f ms while their probes were placed", float64(sc.StopNS)/1e6)
	}
	if sc.Cut != "" {
		fmt.Fprintf(w, "; CUT SHORT by the %s", sc.Cut)
	}
	if sc.Err != "" {
		fmt.Fprintf(w, "; FAILED: %s", sc.Err)
	}
	fmt.Fprintln(w)
	if sc.KernelCheck != "" {
		fmt.Fprintf(w, "    %s\n", sc.KernelCheck)
	}
}

// writeProcs lists the processes of a trace that has more than its
// target: each with its name, how it joined, and whether it exited.
func writeProcs(w io.Writer, ps []analyzer.Process) {
	if len(ps) == 0 || (len(ps) == 1 && ps[0].Joined == trace.ProcTarget) {
		return
	}
	fmt.Fprintf(w, "  %d process(es):\n", len(ps))
	for _, p := range ps {
		name := p.Comm
		if name == "" {
			name = "name unknown"
		}
		how := p.Joined
		switch p.Joined {
		case trace.ProcFork:
			how = fmt.Sprintf("forked by %d", p.Parent)
		case trace.ProcRunning:
			how = "running when tracing began"
		case trace.ProcFirst:
			how = "started while tracing"
		case trace.ProcFound:
			how = "found mapping a verbs library while tracing"
		}
		state := "running"
		switch {
		case p.Exited && p.ExitSignal != 0:
			state = fmt.Sprintf("killed by signal %d (%s)", p.ExitSignal, syscall.Signal(p.ExitSignal))
		case p.Exited:
			state = fmt.Sprintf("exited with code %d", *p.ExitCode)
		}
		fmt.Fprintf(w, "    pid %d (%s): %s, %s\n", p.PID, name, how, state)
	}
}

// writeProbes writes why each probe that failed was not placed and, when
// verbose, where each was placed and how it was found; else how many
// were. Each is said once however often a window placed it; the windows'
// marks are not probes (the sentinel's line says the windows).
func writeProbes(w io.Writer, attach []trace.Attach, verbose bool) {
	type key struct {
		fn, path, how, err string
		off                uint64
	}
	seen := map[key]bool{}
	placed := 0
	for _, a := range attach {
		k := key{a.Func, a.Path, a.How, a.Err, a.Offset}
		if a.WindowMark() || seen[k] {
			continue
		}
		seen[k] = true
		switch {
		case a.Func == trace.FuncDirectVerbs:
			fmt.Fprintf(w, "  direct verbs: pid %d maps %s, which %s\n", a.PID, a.Path, a.Err)
		case a.Func == trace.FuncMemoryRead:
			fmt.Fprintf(w, "  memory reads: the QPs of pid %d on %s are not read: %s; their occupancy is seen only in windows\n", a.PID, a.Path, a.Err)
		case a.Err != "":
			fmt.Fprintf(w, "  probe %-18s NOT ATTACHED %s+%#x: %s\n", a.Func, a.Path, a.Offset, a.Err)
		case verbose:
			how := a.How
			if a.DebugFile != "" {
				how += " " + a.DebugFile
			}
			fmt.Fprintf(w, "  probe %-18s %s+%#x (%s)\n", a.Func, a.Path, a.Offset, how)
			placed++
		default:
			placed++
		}
	}
	if !verbose && placed > 0 {
		fmt.Fprintf(w, "  probes: %d placed (-v lists where, and how each was found)\n", placed)
	}
}
