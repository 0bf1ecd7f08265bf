package probe

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sqscope/sqscope/ibv"
	"github.com/sqscope/sqscope/trace"
)

// VerbsProc is a process that uses verbs, as `sqscope ps` shows it: what it
// maps and opens, the QPs the kernel lists for it, and how sqscope would
// reach its data path.
type VerbsProc struct {
	PID        int      `json:"pid"`
	Comm       string   `json:"comm"`
	Libibverbs string   `json:"libibverbs,omitempty"` // the libibverbs it maps ("" for a binary with the simulated HCA alone)
	Providers  []string `json:"providers,omitempty"`  // the provider libraries it maps
	Simulated  bool     `json:"simulated_hca"`        // its executable holds the simulated HCA
	Devices    []string `json:"devices,omitempty"`    // the RDMA devices it has open (its uverbs files)
	// QPs are the kernel's list of its QPs (RDMA netlink), nil with
	// QPsAbsent saying why (no RDMA in the kernel, or a simulated HCA's
	// QPs, which no kernel lists).
	QPs       []RdmaQP `json:"qps"`
	QPsAbsent string   `json:"qps_absent,omitempty"`
	// DataPath says, per data-path function sqscope probes on a running
	// process (post_send, poll_cq), how `trace -p` would find it: by
	// symbol, in a debug file, or (none found) by the memory scan of its
	// ops table; Trace is that in a sentence.
	DataPath map[string]string `json:"data_path"`
	Trace    string            `json:"trace"`
	// DirectVerbs are the objects it maps that import mlx5dv's functions
	// for building WQEs or reaching a QP's queues itself, each as "FILE:
	// FUNC, ...": QPs it drives that way post without ibv_post_send, and
	// no probe sees their posts.
	DirectVerbs []string `json:"direct_verbs,omitempty"`
	// Scan is what the memory scan of `trace -p` finds in it now (ps -v);
	// nil unless asked for.
	Scan *PSScan `json:"scan,omitempty"`
}

// PSScan is what a memory scan of a process found: its verbs contexts and
// QPs, what it read, and the QPs the kernel lists that it did not find.
type PSScan struct {
	BytesRead int64       `json:"bytes_read"`
	Mappings  int         `json:"mappings"`
	Seconds   float64     `json:"seconds"`
	Contexts  []string    `json:"contexts"` // each context's provider file
	QPs       []ScanQPRow `json:"qps"`
	// Cut names the bound that ended the scan early: objects past it
	// were not seen.
	Cut string `json:"cut,omitempty"`
	Err string `json:"error,omitempty"`
	// Missed are the QP numbers the kernel lists for the process that
	// the scan did not find (nil where the kernel lists none).
	Missed []uint32 `json:"kernel_qps_not_found,omitempty"`
}

// ScanQPRow is a QP a scan found.
type ScanQPRow struct {
	QPNum uint32 `json:"qpn"`
	Type  string `json:"type"`
	State string `json:"state"`
}

// ScanVerbsProc runs the memory scan `trace -p` would on p, within b, and
// keeps what it found in p.Scan. The process runs on; it is not stopped.
func ScanVerbsProc(p *VerbsProc, b ScanBounds) {
	res, err := ScanDataPath(p.PID, b)
	sc := &PSScan{BytesRead: res.Bytes, Mappings: res.Mappings, Seconds: res.Duration.Seconds(), Cut: res.Cut,
		Contexts: []string{}, QPs: []ScanQPRow{}}
	if err != nil && !errors.Is(err, ErrScanBound) {
		sc.Err = err.Error()
	}
	for _, c := range res.Contexts {
		sc.Contexts = append(sc.Contexts, c.Provider)
	}
	found := map[uint32]bool{}
	for _, q := range res.QPs {
		found[q.QPNum] = true
		sc.QPs = append(sc.QPs, ScanQPRow{QPNum: q.QPNum, Type: ibv.QPTypeName(q.Type), State: ibv.QPStateName(int32(q.State))})
	}
	for _, q := range p.QPs {
		if !found[q.QPNum] {
			sc.Missed = append(sc.Missed, q.QPNum)
		}
	}
	p.Scan = sc
}

// psFuncs are the data-path functions `sqscope ps` says how it finds.
var psFuncs = []string{"post_send", "poll_cq"}

// VerbsProcs lists the processes of the host that use verbs (they map
// libibverbs, or run a binary with the simulated HCA), other than this
// one, each with the QPs the kernel lists for it and how sqscope would
// trace it; debug are the directories of separate debug files (empty:
// the defaults). The kernel's list is read once: netErr says why it
// could not be.
func VerbsProcs(debug []string) (procs []VerbsProc, netErr error) {
	procs = []VerbsProc{} // none is an empty list
	qps, netErr := RdmaQPs()
	byPID := map[uint32][]RdmaQP{}
	for _, q := range qps {
		if !q.Kernel {
			byPID[q.PID] = append(byPID[q.PID], q)
		}
	}
	dirs := debugDirs(debug)
	imports := directImports{} // the objects processes share are read once
	for _, pid := range verbsProcesses(nil, map[fileID]bool{}) {
		p, ok := inspect(pid, dirs, imports)
		if !ok {
			continue // ended meanwhile
		}
		switch {
		case netErr != nil && errors.Is(netErr, ErrNoRdmaNetlink):
			p.QPsAbsent = "the kernel lists no RDMA QP: " + netErr.Error()
		case netErr != nil:
			p.QPsAbsent = "the kernel's QP list could not be read: " + netErr.Error()
		default:
			p.QPs = byPID[uint32(pid)]
		}
		if p.Simulated && len(p.QPs) == 0 && p.QPsAbsent == "" {
			p.QPsAbsent = "the simulated HCA's QPs are the process's own: no kernel lists them (trace -p finds them)"
		}
		procs = append(procs, p)
	}
	return procs, netErr
}

// inspect reads what one process maps and opens and finds its data path
// by symbol, and which of its objects import direct verbs; ok is false
// when it ended.
func inspect(pid int, dirs []string, imports directImports) (VerbsProc, bool) {
	p := VerbsProc{PID: pid, DataPath: map[string]string{}}
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		return p, false
	}
	p.Comm = strings.TrimSpace(string(comm))
	p.Libibverbs, _ = libibverbsMapped(pid)
	if maps, err := readMaps(pid); err == nil {
		for _, m := range maps {
			if m.Path != "" && providerFile(m.Path) && !isLibibverbs(m.Path) && !slices.Contains(p.Providers, m.Path) {
				p.Providers = append(p.Providers, m.Path)
			}
		}
	}
	p.Devices = openDevices(pid)
	for _, d := range imports.of(pid) {
		p.DirectVerbs = append(p.DirectVerbs, d.path+": "+strings.Join(d.funcs, ", "))
	}
	for _, h := range dataPathBySymbol(pid, dirs) {
		if slices.Contains(psFuncs, h.r.name) && p.DataPath[h.r.name] == "" {
			p.DataPath[h.r.name] = h.how
			p.Simulated = p.Simulated || h.how == trace.HowSimSymbol
		}
	}
	var missing []string
	for _, fn := range psFuncs {
		if p.DataPath[fn] == "" {
			p.DataPath[fn] = "memory scan"
			missing = append(missing, fn)
		}
	}
	switch {
	case len(missing) == 0:
		p.Trace = "trace -p " + fmt.Sprint(pid) + ": its QPs' data path found by " + p.DataPath["post_send"] + ", traced from the next call"
	default:
		p.Trace = fmt.Sprintf("trace -p %d: %s found by no symbol (stripped provider, no debug file): the attach reads its ops table from its memory (a scan of seconds; --scan-mib, --scan-time bound it)", pid, strings.Join(missing, " and "))
	}
	if len(p.DirectVerbs) > 0 {
		p.Trace += "; it imports mlx5dv's direct-verbs functions (" + strings.Join(p.DirectVerbs, "; ") +
			"): the QPs it drives through them post without ibv_post_send, and no probe sees their posts"
	}
	return p, true
}

// openDevices are the RDMA devices a process has open: the device of each
// uverbs file among its open files.
func openDevices(pid int) []string {
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return nil
	}
	var devs []string
	for _, fd := range fds {
		target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if err != nil || !strings.HasPrefix(target, "/dev/infiniband/uverbs") {
			continue
		}
		name := filepath.Base(target)
		dev := name
		if b, err := os.ReadFile("/sys/class/infiniband_verbs/" + name + "/ibdev"); err == nil {
			dev = strings.TrimSpace(string(b))
		}
		if !slices.Contains(devs, dev) {
			devs = append(devs, dev)
		}
	}
	return devs
}

// VerbsPIDs lists the processes of the host that use verbs, other than
// this one, with their names: what VerbsProcs finds, without looking
// into each (a shell completing -p asks it).
func VerbsPIDs() map[int]string {
	out := map[int]string{}
	for _, pid := range verbsProcesses(nil, map[fileID]bool{}) {
		comm, _ := os.ReadFile(ProcDir(pid) + "/comm")
		out[pid] = strings.TrimSpace(string(comm))
	}
	return out
}
