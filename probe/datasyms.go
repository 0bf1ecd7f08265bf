package probe

import (
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sqscope/sqscope/trace"
)

// dataPathSymbols are names the data-path functions carry in binaries that
// keep their symbol table: the simulated HCA (static functions of the
// sqscope binary) and rdma-core providers built with symbols. A process
// traced with -p created its QPs before sqscope attached, so the ops table
// reached from QP creation is not there to read; these names are the next
// best way in (docs/design.md, "Where the probes go").
var dataPathSymbols = map[string][]string{
	"post_send":               {"sim_post_send", "mlx5_post_send", "rxe_post_send", "mlx4_post_send"},
	"poll_cq":                 {"sim_poll_cq", "mlx5_poll_cq", "rxe_poll_cq", "mlx4_poll_cq"},
	"post_recv":               {"sim_post_recv", "mlx5_post_recv", "rxe_post_recv", "mlx4_post_recv"},
	"wr_start":                {"sim_wr_start"},
	"wr_complete":             {"sim_wr_complete"},
	"wr_abort":                {"sim_wr_abort"},
	"wr_send":                 {"sim_wr_send"},
	"wr_send_imm":             {"sim_wr_send_imm"},
	"wr_rdma_write":           {"sim_wr_rdma_write"},
	"wr_rdma_write_imm":       {"sim_wr_rdma_write_imm"},
	"wr_rdma_read":            {"sim_wr_rdma_read"},
	"wr_set_inline_data":      {"sim_wr_set_inline_data"},
	"wr_set_inline_data_list": {"sim_wr_set_inline_data_list"},
	"wr_set_sge":              {"sim_wr_set_sge"},
	"wr_set_sge_list":         {"sim_wr_set_sge_list"},
	"wr_send_inv":             {"sim_wr_send_inv"},
	"wr_atomic_cmp_swp":       {"sim_wr_atomic_cmp_swp"},
	"wr_atomic_fetch_add":     {"sim_wr_atomic_fetch_add"},
	"wr_atomic_write":         {"sim_wr_atomic_write"},
	"wr_local_inv":            {"sim_wr_local_inv"},
	"wr_bind_mw":              {"sim_wr_bind_mw"},
	"start_poll":              {"sim_start_poll"},
	"next_poll":               {"sim_next_poll"},
	"end_poll":                {"sim_end_poll"},
}

// providerFile reports whether a mapped file may hold data-path functions.
func providerFile(path string) bool {
	return strings.Contains(path, "libibverbs/") || strings.Contains(path, "-rdmav") ||
		strings.Contains(path, "libmlx5") || strings.Contains(path, "librxe")
}

// symbolHit is a data-path function found by name, to be attached.
type symbolHit struct {
	r              role
	path, openPath string
	off            uint64
	how, debug     string
}

// dataPathBySymbol finds data-path functions by name in a running
// process's executable and mapped provider libraries, or in their separate
// debug files (debugfile.go). Reading those files takes a while: it is
// done before the process is stopped (attachBySymbol then places them).
func (t *Tracer) dataPathBySymbol(pid int) []symbolHit {
	return dataPathBySymbol(pid, debugDirs(t.opts.DebugDirs))
}

// dataPathBySymbol is Tracer.dataPathBySymbol with the debug directories
// given.
func dataPathBySymbol(pid int, dirs []string) []symbolHit {
	files := [][2]string{}
	if p, err := readlinkExe(pid); err == nil {
		files = append(files, [2]string{p, ProcDir(pid) + "/exe"})
	}
	if maps, err := readMaps(pid); err == nil {
		seen := map[string]bool{}
		for _, m := range maps {
			if m.Path == "" || seen[m.Path] || !providerFile(m.Path) {
				continue
			}
			seen[m.Path] = true
			files = append(files, [2]string{m.Path, ProcDir(pid) + "/root" + m.Path})
		}
	}
	var hits []symbolHit
	for _, f := range files {
		sf, err := openSymbolFinder(f[1], filepath.Dir(f[0]), dirs)
		if err != nil {
			continue
		}
		for _, r := range roles {
			if !r.probed() {
				continue
			}
			for _, name := range dataPathSymbols[r.name] {
				fn, err := sf.find(name)
				if err != nil {
					continue
				}
				h := symbolHit{r: r, path: f[0], openPath: f[1], off: fn.Offset, how: "symbol", debug: fn.DebugFile}
				switch {
				case fn.DebugFile != "":
					h.how = "debug-file"
				case strings.HasPrefix(name, "sim_"):
					h.how = trace.HowSimSymbol
				}
				hits = append(hits, h)
				break
			}
		}
		sf.Close()
	}
	return hits
}

// attachBySymbol places what dataPathBySymbol found and returns how many
// it placed.
func (t *Tracer) attachBySymbol(pid int, hits []symbolHit) int {
	placed := 0
	hits = slices.Clone(hits)
	slices.SortStableFunc(hits, func(a, b symbolHit) int { return postLast(a.r, b.r) }) // polls first
	for _, h := range hits {
		if t.sentinelDefers(h.r) {
			placed += t.deferDataPath(uint32(pid), h.r, h.path, h.openPath, h.off, h.how)
			continue
		}
		if a := t.attachFound(uint32(pid), h.r, h.r.cookie, h.path, h.openPath, h.off, h.how, h.debug); a.Err == "" && a.Func != "" {
			placed++
		}
	}
	return placed
}

func readlinkExe(pid int) (string, error) {
	return os.Readlink(ProcDir(pid) + "/exe")
}
