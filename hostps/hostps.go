// Package hostps lays out the processes of a host that use verbs, as
// `sqscope ps` prints them (probe.VerbsProcs finds them).
package hostps

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/sqscope/sqscope/ibv"
	"github.com/sqscope/sqscope/probe"
)

// WriteText writes the processes as a table, each one's QPs and how it would
// be traced under it.
func WriteText(w io.Writer, procs []probe.VerbsProc) error {
	if len(procs) == 0 {
		_, err := fmt.Fprintln(w, "no process uses verbs")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "PID\tCOMM\tDEVICES\tPROVIDER\tQPs")
	for _, p := range procs {
		prov := "-"
		switch {
		case p.Simulated:
			prov = "simulated HCA"
		case len(p.Providers) > 0:
			var names []string
			for _, f := range p.Providers {
				names = append(names, providerName(f))
			}
			prov = strings.Join(names, ",")
		}
		devs := strings.Join(p.Devices, ",")
		if devs == "" {
			devs = "-"
		}
		qps := fmt.Sprint(len(p.QPs))
		if p.QPsAbsent != "" {
			qps = "?"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", p.PID, p.Comm, devs, prov, qps)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, p := range procs {
		fmt.Fprintf(w, "\npid %d (%s):\n", p.PID, p.Comm)
		for _, q := range p.QPs {
			fmt.Fprintf(w, "  QP %#x (%d) %s %s on %s port %d\n", q.QPNum, q.QPNum, ibv.QPTypeName(q.Type), ibv.QPStateName(int32(q.State)), q.Device, q.Port)
		}
		if p.QPsAbsent != "" {
			fmt.Fprintf(w, "  QPs: not listed: %s\n", p.QPsAbsent)
		}
		fmt.Fprintf(w, "  %s\n", p.Trace)
		if p.Scan != nil {
			writeScan(w, p.Scan)
		}
	}
	return nil
}

// writeScan says what the memory scan of ps -v found in a process.
func writeScan(w io.Writer, sc *probe.PSScan) {
	if sc.Err != "" {
		fmt.Fprintf(w, "  memory scan: failed: %s\n", sc.Err)
		return
	}
	fmt.Fprintf(w, "  memory scan: read %.1f MiB of %d mappings in %.2f s: %d verbs context(s), %d QP(s)\n",
		float64(sc.BytesRead)/(1<<20), sc.Mappings, sc.Seconds, len(sc.Contexts), len(sc.QPs))
	for _, c := range sc.Contexts {
		fmt.Fprintf(w, "    context of %s\n", c)
	}
	for _, q := range sc.QPs {
		fmt.Fprintf(w, "    QP %#x (%d) %s %s\n", q.QPNum, q.QPNum, q.Type, q.State)
	}
	if sc.Cut != "" {
		fmt.Fprintf(w, "    cut short by %s: objects past it were not seen\n", sc.Cut)
	}
	if len(sc.Missed) > 0 {
		var qps []string
		for _, n := range sc.Missed {
			qps = append(qps, fmt.Sprintf("%#x (%d)", n, n))
		}
		fmt.Fprintf(w, "    the kernel lists QP(s) the scan did not find: %s\n", strings.Join(qps, ", "))
	}
}

// providerName is a provider library's short name: libmlx5-rdmav34.so is
// mlx5.
func providerName(path string) string {
	base := path[strings.LastIndex(path, "/")+1:]
	base = strings.TrimPrefix(base, "lib")
	if i := strings.IndexAny(base, "-."); i > 0 {
		base = base[:i]
	}
	return base
}
