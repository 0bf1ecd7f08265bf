package analyzer

import (
	"path"
	"reflect"
	"strings"
	"sync"

	"github.com/sqscope/sqscope/ibv"
	"github.com/sqscope/sqscope/trace"
)

// ProviderModel is a verbs provider's rules, as the analyzer core asks
// for them: the core keeps what the application did (WRs, calls, the
// WRs whose completions were not polled, signals, polls) and asks the
// model of the QP's provider what that means on its queue. Each model is
// one file of this package (provider_mlx5.go, provider_rxe.go,
// provider_generic.go) and a Provider entry in providers, registered by
// name and by the library files that identify it; a provider no entry
// names gets the generic model. Its methods are unexported: a model reads
// the QP's state (sq), so the models live here, one file each.
//
// The sentinel mode asks each model the cause of a refusal seen at an
// error site of its provider (refused). Where its queue state is read in
// the target's memory is the probe's (probe/memsample.go): each read
// says what it is (trace.SQSample).
type ProviderModel interface {
	// label names the model in snapshots (QP.Model), "" when it gives no
	// HCA figures: then what a post costs (doorbells rung by MMIO,
	// BlueFlame, WQE basic blocks, DMA, CQE writes, PCIe: sqmodel.go and
	// pcie.go) is not given, and notGiven says so key by key.
	label() string
	// slotFree says when a send-queue slot frees: what the WRs counted
	// outstanding mean for the queue, and which predictions stand.
	slotFree() SlotRule
	// cause classifies a post that failed at WR index i of its list, by
	// the checks the provider makes and in their order; it sets q.failWR
	// to the WR it blames.
	cause(q *sq, p *trace.Post, i int) errCause
	// refused classifies a failure an error-site probe saw (the sentinel
	// mode, sentinel.go): from the WR refused, the QP's caps and state and
	// the site's own checks, the WRs outstanding unknown. It sets
	// q.failWR to 0, the one WR it has.
	refused(q *sq, e *trace.PostFail) errCause
	// causeBasis says what the causes rest on: "" for the provider's own
	// checks, CauseInferred for the QP's reported caps alone.
	causeBasis() string
	// overflow records the diagnosis of an SQ-full ENOMEM.
	overflow(a *Analyzer, q *sq, now uint64)
	// siteOverflow records the provider's own diagnosis of an SQ-full
	// refusal seen at an error site (the sentinel mode: the refused WR and
	// what windows traced, no history of the queue) and reports whether
	// it did; false: its cause needs what the sentinel did not trace, and
	// the site's diagnosis (sq_overflow_at_error_site) stands.
	siteOverflow(a *Analyzer, q *sq, e *trace.PostFail) bool
	// unexplained records what the model says of an ENOMEM it found no
	// cause for, at WR index i of the list (nothing, where the report's
	// count of causes unknown says it all).
	unexplained(a *Analyzer, q *sq, p *trace.Post, i int)
	// notGiven are the JSON keys of a QP's figures (its counters, and
	// "pcie" for its savings) the model cannot give: left out of its JSON
	// and text, zeroed in the totals (QP.Reported).
	notGiven() map[string]bool
	// notes are the lines the report gives of the QP's provider: what it
	// did in the model's terms, what is true there, what the model
	// cannot know (QP.ProviderNotes).
	notes(q *QP) []string
}

// SlotRule is when a provider frees a send-queue slot.
type SlotRule uint8

const (
	// SlotFreeUnknown: the model does not know; the WRs counted
	// outstanding (posted, completion not polled) bound nothing, so no
	// prediction rests on them.
	SlotFreeUnknown SlotRule = iota
	// SlotFreedByCQE: at the poll of the CQE that retires the WR and every
	// earlier unsignaled one (mlx5): the WRs counted outstanding are the
	// queue's occupancy, bounded by its depth.
	SlotFreedByCQE
	// SlotFreedOnExecution: when the WR executes, signaled or not, before
	// its completion is polled (rxe): the queue holds at most the WRs
	// counted outstanding, maybe fewer.
	SlotFreedOnExecution
)

// CauseInferred is the basis of a cause the generic model infers from the
// caps a QP reports (QP.CauseBasis, Diagnosis.CauseBasis).
const CauseInferred = "inferred from caps"

// Provider is a verbs provider sqscope knows: its name in snapshots, the
// prefixes of the library file names that identify it (rdma-core installs
// them as libmlx5.so.1, libmlx5-rdmav34.so, librxe-rdmav34.so), and the
// model its QPs follow.
type Provider struct {
	Name  string
	Files []string
	Model ProviderModel
}

// simName is the simulated mlx5-like HCA (verbs/sim*.c), known by its
// calls (sqsim_*) and symbols rather than by a library: it follows the
// mlx5 model, which it is built to.
const simName = "sim"

// unknownName names, in snapshots, a provider no entry knows.
const unknownName = "unknown"

// providers are the registered providers (registerProvider), looked up
// by name and by library file.
var providers []*Provider

// registerProvider adds a provider; each model's file registers its own.
// Names and file prefixes are unique (TestProviderRegistry).
func registerProvider(p *Provider) { providers = append(providers, p) }

// providerNamed returns the registered provider of that name, nil when
// none is.
func providerNamed(name string) *Provider {
	for _, p := range providers {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// providerOf names the provider of a QP from its create: the simulated
// HCA's calls, or the library its post_send is in.
func providerOf(via, lib string) *Provider {
	if strings.HasPrefix(via, "sqsim_") {
		return providerNamed(simName)
	}
	return providerOfFile(lib)
}

// providerOfFile names the provider whose library a file is, nil when no
// registered one is.
func providerOfFile(file string) *Provider {
	base := path.Base(file)
	for _, p := range providers {
		for _, f := range p.Files {
			if strings.HasPrefix(base, f) {
				return p
			}
		}
	}
	return nil
}

// modelOf is the model a provider's QPs follow: the generic one for a
// provider sqscope does not know (nil).
func modelOf(p *Provider) ProviderModel {
	if p == nil {
		return genericModel{}
	}
	return p.Model
}

// nameOf is a provider's name in snapshots.
func nameOf(p *Provider) string {
	if p == nil {
		return unknownName
	}
	return p.Name
}

// model is the model q follows.
func (q *sq) model() ProviderModel { return modelOf(q.prov) }

// slotRule is when q's provider frees a slot.
func (q *sq) slotRule() SlotRule { return q.model().slotFree() }

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
		p = providerNamed(simName)
	}
	a.notePIDProvider(e.PID, p)
}

// notePIDProvider keeps the provider of a process's data path; a process
// seen on two is left to each QP's own create (nil: unknown).
func (a *Analyzer) notePIDProvider(pid uint32, p *Provider) {
	if p == nil {
		return
	}
	if a.pidProv == nil {
		a.pidProv = map[uint32]*Provider{}
	}
	if old, ok := a.pidProv[pid]; ok && old != p {
		a.pidProv[pid] = nil
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
	q.provFromCreate = e.Via != trace.ViaMemory || q.prov != nil
	a.notePIDProvider(e.PID, q.prov)
}

// resolveProvider gives a QP whose create was not seen (or named no
// provider) its process's, once known.
func (a *Analyzer) resolveProvider(q *sq) {
	if q.prov == nil && (!q.provFromCreate || q.provLib == "") {
		q.prov = a.pidProv[q.key.pid]
	}
}

// sends is how many of a QP's WRs are SENDs, which consume a receive at
// the peer.
func (m *OpcodeMix) sends() uint64 {
	return m[ibv.WRSend] + m[ibv.WRSendWithImm] + m[ibv.WRSendWithInv]
}

// isSend reports whether a WR opcode is a SEND, which takes a receive at
// the peer.
func isSend(op uint8) bool {
	return op == ibv.WRSend || op == ibv.WRSendWithImm || op == ibv.WRSendWithInv
}

// The snapshot's figures of what a post costs on an mlx5-like HCA
// (sqmodel.go, pcie.go), left out where the model gives none. The payload
// reads (dma_reads_payload, dma_bytes_payload) are among them: they are
// the HCA's DMA reads of the SGEs not inline, which rxe (the kernel copies
// the payload) does not do and another provider's hardware may do in
// other transactions.
var costCounters = keySet("bf_writes", "wqebbs", "dma_reads_wqe", "dma_reads_payload",
	"cqe_writes", "mmio_bytes", "dma_bytes_wqe", "dma_bytes_payload", "inline_sges", "baseline_wqe_bytes",
	"dma_writes_response", "dma_bytes_response")

// hideCosts zeroes, for a QP whose model prices no post, the figures the
// mlx5 geometry computed (they are left out of its JSON and text and out
// of the totals).
func hideCosts(c *Counters) {
	c.BFWrites, c.WQEBBs, c.DMAReadsWQE, c.DMAReadsPayload, c.CQEWrites = 0, 0, 0, 0, 0
	c.MMIOBytes, c.DMABytesWQE, c.DMABytesPayload, c.InlineSGEs, c.BaselineWQEBytes = 0, 0, 0, 0, 0
	c.DMAWritesResponse, c.DMABytesResponse = 0, 0
}

// snapModel is the model of a QP in a snapshot: its provider's by name
// (the analyzer's snapshot), else the one whose label it carries (a QP a
// front end built), else the generic one.
func (q *QP) snapModel() ProviderModel {
	if p := providerNamed(q.Provider); p != nil {
		return p.Model
	}
	if q.Model != "" {
		for _, p := range providers {
			if p.Model.label() == q.Model {
				return p.Model
			}
		}
	}
	return genericModel{}
}

// ProviderNotes are the lines the reports give of the QP's provider, by
// its model: the mlx5 model's HCA figures and savings, what is true on
// rxe, what the generic model rests on and cannot know. Made from the
// QP's own fields, so any front end can give them.
func (q *QP) ProviderNotes() []string { return q.snapModel().notes(q) }

// notModeled is what a QP's JSON leaves out for its provider: what its
// model does not give and, where the model infers ENOMEM causes from caps
// the trace did not see (a QP found in memory), the causes.
func (q *QP) notModeled() map[string]bool {
	m := q.snapModel()
	if q.CapsKnown || q.CountersOnly || m.causeBasis() != CauseInferred {
		return m.notGiven()
	}
	t := reflect.TypeOf(m)
	if ng, ok := noCausesOf.Load(t); ok {
		return ng.(map[string]bool)
	}
	ng := union(m.notGiven(), causeCounters)
	noCausesOf.Store(t, ng)
	return ng
}

// causeCounters are the ENOMEM causes a model tells apart.
var causeCounters = keySet("enomem_sq_full", "enomem_inline", "enomem_sge")

// sentinelComplete are the figures of a sentinel-mode QP that are whole
// rather than a sample of its windows: every failure runs an error site
// (or a window's probe), so the refusals by cause are all counted; the
// occupancy is the last window's (or the depth, at an SQ-full refusal),
// the peak what the windows and refusals saw.
var sentinelComplete = keySet("enomem_sq_full", "enomem_inline", "enomem_sge", "enomem",
	"einval", "not_rts", "other_errors", "outstanding", "peak_outstanding")

// noCausesOf holds, by the type of a model that infers causes from caps,
// what a QP of it whose caps are unknown leaves out.
var noCausesOf sync.Map

// savingsKeys are the JSON names of a QP's PCIe savings (its "pcie").
var savingsKeys = keySet("actual", "baseline", "doorbells_saved", "wqe_fetches_saved_batching",
	"wqe_fetches_saved_blueflame", "payload_reads_saved_inline", "cqe_writes_saved_unsignaled",
	"bytes_saved", "transactions_saved_pct", "bytes_saved_pct")

// Reported reports whether the QP's JSON holds the figure with this name
// (of the QP, its counters or its PCIe savings): measured in its mode
// (Measured) and given by its provider's model. A front end that exports
// figures one by one (serve) leaves out the others instead of a 0.
func (q QP) Reported(key string) bool {
	if key == MemoryPostedKey {
		return q.Memory != nil
	}
	if q.Sentinel && !sentinelComplete[key] {
		return false
	}
	nm := q.notModeled()
	if nm[key] || nm["pcie"] && savingsKeys[key] {
		return false
	}
	return q.Measured(key)
}

// notGivenByAll is what none of the models of a snapshot's QPs gives:
// the totals leave it out (nil when there are none).
func notGivenByAll(models []ProviderModel) map[string]bool {
	var drop map[string]bool
	for i, m := range models {
		ng := m.notGiven()
		if i == 0 {
			drop = union(ng)
			continue
		}
		for k := range drop {
			if !ng[k] {
				delete(drop, k)
			}
		}
	}
	return drop
}

// addModel adds m to the distinct models of a snapshot's QPs.
func addModel(models []ProviderModel, m ProviderModel) []ProviderModel {
	for _, o := range models {
		if o == m {
			return models
		}
	}
	return append(models, m)
}
