package analyzer

import (
	"path"
	"strings"

	"github.com/sqscope/sqscope/ibv"
	"github.com/sqscope/sqscope/trace"
)

// Provider is the verbs provider a QP runs on: which rules the model
// applies to it. The mlx5 send-queue model (WQEs, doorbells, BlueFlame,
// PCIe, the three ENOMEM causes, slots freed by CQEs) is mlx5's and the
// simulated HCA's, which is built to it; rxe's rules are in rxe.go; of a
// provider sqscope has no model of, only what the application did is
// reported.
type Provider uint8

const (
	ProviderUnknown Provider = iota
	ProviderMlx5
	ProviderSim // the simulated mlx5-like HCA (verbs/sim*.c)
	ProviderRxe
)

var providerNames = [...]string{"unknown", "mlx5", "sim", "rxe"}

func (p Provider) String() string {
	if int(p) < len(providerNames) {
		return providerNames[p]
	}
	return "unknown"
}

// Mlx5Model is the label of every figure and cause the mlx5 model gives.
const Mlx5Model = "mlx5 model"

// mlx5Model reports whether the mlx5 model applies.
func (p Provider) mlx5Model() bool { return p == ProviderMlx5 || p == ProviderSim }

// model is the label of the model the provider's figures come from, empty
// when none applies.
func (p Provider) model() string {
	if p.mlx5Model() {
		return Mlx5Model
	}
	return ""
}

// providerOf names the provider of a QP from its create: the simulated
// HCA's calls, or the library its post_send is in.
func providerOf(via, lib string) Provider {
	if strings.HasPrefix(via, "sqsim_") {
		return ProviderSim
	}
	return providerOfFile(lib)
}

// providerOfFile names the provider whose library a file is (rdma-core
// installs them as libmlx5.so.1, libmlx5-rdmav34.so, librxe-rdmav34.so).
func providerOfFile(file string) Provider {
	base := path.Base(file)
	switch {
	case strings.HasPrefix(base, "libmlx5"):
		return ProviderMlx5
	case strings.HasPrefix(base, "librxe"):
		return ProviderRxe
	}
	return ProviderUnknown
}

// dataPathFuncs are the probes whose file tells the provider of the QPs
// posted through them.
var dataPathFuncs = map[string]bool{"post_send": true, "wr_start": true, "wr_complete": true}

// noteAttach learns a process's provider from where its data path was
// attached: the QPs it created before the trace began take it.
func (a *Analyzer) noteAttach(e *trace.Attach) {
	if e.Err != "" || !dataPathFuncs[e.Func] {
		return
	}
	p := providerOfFile(e.Path)
	if e.How == trace.HowSimSymbol {
		p = ProviderSim
	}
	a.notePIDProvider(e.PID, p)
}

// notePIDProvider keeps the provider of a process's data path; a process
// seen on two is left to each QP's own create.
func (a *Analyzer) notePIDProvider(pid uint32, p Provider) {
	if p == ProviderUnknown {
		return
	}
	if a.pidProv == nil {
		a.pidProv = map[uint32]Provider{}
	}
	if old, ok := a.pidProv[pid]; ok && old != p {
		a.pidProv[pid] = ProviderUnknown
		return
	}
	a.pidProv[pid] = p
}

// qpCreateProvider applies the provider a QP's create names.
func (a *Analyzer) qpCreateProvider(q *sq, e *trace.QPCreate) {
	q.prov, q.provLib = providerOf(e.Via, e.Lib), e.Lib
	// a QP found in memory names the file its context's ops point into;
	// where that names no provider, the process's data path may (a
	// simulated HCA found by symbol)
	q.provFromCreate = e.Via != trace.ViaMemory || q.prov != ProviderUnknown
	a.notePIDProvider(e.PID, q.prov)
}

// resolveProvider gives a QP whose create was not seen (or named no
// provider) its process's, once known.
func (a *Analyzer) resolveProvider(q *sq) {
	if q.prov == ProviderUnknown && (!q.provFromCreate || q.provLib == "") {
		q.prov = a.pidProv[q.key.pid]
	}
}

// providerCause classifies a failed post by the provider's checks where
// they are not mlx5's (ok false: the mlx5 rules of cause apply).
func (q *sq) providerCause(p *trace.Post) (errCause, bool) {
	switch {
	case q.prov.mlx5Model():
		return causeNone, false
	case p.Ret == ibv.EINVAL:
		return causeEINVAL, true
	case p.Ret != ibv.ENOMEM:
		return causeOther, true
	case q.prov == ProviderRxe:
		// rxe's post_send returns ENOMEM for a full ring only (too many
		// SGEs and inline data over the limit are EINVAL there)
		return causeSQFull, true
	}
	return causeUnknownENOMEM, true
}

// sends is how many of a QP's WRs are SENDs, which consume a receive at
// the peer.
func (m *OpcodeMix) sends() uint64 {
	return m[ibv.WRSend] + m[ibv.WRSendWithImm] + m[ibv.WRSendWithInv]
}

// The snapshot's figures of the mlx5 model, left out for other providers.
// The payload SGEs and bytes not inline (dma_reads_payload,
// dma_bytes_payload) stay: every provider reads them from the
// application's memory.
var (
	mlx5Counters = keySet("bf_writes", "wqebbs", "dma_reads_wqe",
		"cqe_writes", "enomem_inline", "enomem_sge", "mmio_bytes", "dma_bytes_wqe",
		"inline_sges", "baseline_wqe_bytes", "dma_writes_response", "dma_bytes_response")
	// of a provider with no model, an ENOMEM's cause is not known either
	unknownCounters = union(mlx5Counters, keySet("enomem_sq_full"))
	mlx5QP          = union(mlx5Counters, keySet("pcie"))
	unknownQP       = union(unknownCounters, keySet("pcie"))
)

// hideMlx5 zeroes, for a QP the mlx5 model does not apply to, the figures
// the model computed (they are left out of its JSON and text and out of
// the totals).
func hideMlx5(c *Counters) {
	c.BFWrites, c.WQEBBs, c.DMAReadsWQE, c.CQEWrites = 0, 0, 0, 0
	c.MMIOBytes, c.DMABytesWQE, c.InlineSGEs, c.BaselineWQEBytes = 0, 0, 0, 0
	c.DMAWritesResponse, c.DMABytesResponse = 0, 0
}

// notModeled is what a QP's JSON leaves out for its provider.
func (q *QP) notModeled() map[string]bool {
	switch {
	case q.Model != "":
		return nil
	case q.Provider == ProviderRxe.String():
		return mlx5QP
	}
	return unknownQP
}

// savingsKeys are the JSON names of a QP's PCIe savings (its "pcie").
var savingsKeys = keySet("actual", "baseline", "doorbells_saved", "wqe_fetches_saved_batching",
	"wqe_fetches_saved_blueflame", "payload_reads_saved_inline", "cqe_writes_saved_unsignaled",
	"bytes_saved", "transactions_saved_pct", "bytes_saved_pct")

// Reported reports whether the QP's JSON holds the figure with this name
// (of the QP, its counters or its PCIe savings): measured in its mode
// (Measured) and given by its provider's model. A front end that exports
// figures one by one (serve) leaves out the others instead of a 0.
func (q QP) Reported(key string) bool {
	nm := q.notModeled()
	if nm[key] || nm["pcie"] && savingsKeys[key] {
		return false
	}
	return q.Measured(key)
}
