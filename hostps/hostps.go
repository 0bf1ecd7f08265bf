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
	}
	return nil
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
