package workload

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"syscall"
)

// hcaOnly are the counter names only the simulated HCA can know.
var hcaOnly = []string{"bf_writes", "wqebbs", "dma_reads_wqe", "dma_reads_payload", "cqe_writes",
	"mmio_bytes", "dma_bytes_wqe", "dma_bytes_payload", "inline_bytes", "flushed_cqes", "post_recvs", "outstanding",
	"dma_writes_response", "dma_bytes_response",
	"cq_overrun_errs", "recvs_consumed", "recv_cqes_polled", "rnr_waits", "rnr_retry_exc"}

// MarshalJSON writes the shared counter names at the top level (the names a
// trace report uses), then the application's view under "app". On a real
// device the HCA-only counters are left out rather than shown as zero.
func (q QPResult) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(q.Counters)
	if err != nil {
		return nil, err
	}
	m := map[string]any{}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	if !q.HCATruth {
		for _, k := range hcaOnly {
			delete(m, k)
		}
	}
	m["qp_type"] = q.Type.String()
	m["max_send_sge"] = q.Caps.MaxSendSGE
	m["truth"] = map[bool]string{true: "hca", false: "application"}[q.HCATruth]
	if !q.SizesVary {
		m["wr_size"] = q.WRSize
	}
	m["app"] = q.App
	if q.Receiver != nil {
		m["receiver"] = q.Receiver
	}
	if q.CQ != nil {
		m["cq"] = q.CQ
	}
	if q.SRQ != nil {
		m["srq"] = q.SRQ
	}
	return json.Marshal(m)
}

// WriteJSON writes one object per QP as a JSON array.
func (r *Result) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r.QPs)
}

// WriteText writes a perftest-like summary and, per QP, what happened.
func (r *Result) WriteText(w io.Writer) {
	c := r.Config
	var wrs, attempts uint64
	var secs, postNS, latNS float64
	var latN int
	for _, q := range r.QPs {
		wrs += q.App.WRs
		attempts += q.App.Attempts
		if q.App.Seconds > secs {
			secs = q.App.Seconds
		}
		postNS += q.App.AvgPostNS
		if q.App.AvgLatencyNS > 0 {
			latNS += q.App.AvgLatencyNS
			latN++
		}
	}
	n := float64(len(r.QPs))
	size, vary := c.Size, false
	inl := "no"
	if len(r.QPs) > 0 {
		size, vary = r.QPs[0].WRSize, r.QPs[0].SizesVary
		if r.QPs[0].InlineOn {
			inl = "yes"
		}
	}
	fmt.Fprintf(w, "sqscope workload: device %s, %s %s, api %s, %d QP(s)", r.Device, c.Conn, opNames(c.Opcodes), c.API, len(r.QPs))
	if c.Fault != FaultNone {
		fmt.Fprintf(w, ", fault %s", c.Fault)
		if c.Fault == FaultLazyPoll {
			fmt.Fprintf(w, "=%d", c.LazyPoll)
		}
	}
	if c.SigAll {
		fmt.Fprint(w, ", sq_sig_all")
	}
	fmt.Fprintln(w)
	line := strings.Repeat("-", 100)
	fmt.Fprintln(w, line)
	fmt.Fprintf(w, " %-8s %-12s %-10s %-7s %-7s %-10s %-10s %-12s %-12s\n",
		"#bytes", "#WRs", "post_list", "cq_mod", "inline", "Mops", "MB/s", "post ns avg", "lat us avg")
	var mops float64
	bytes, mbs := fmt.Sprint(size), "-"
	if secs > 0 {
		mops = float64(wrs) / secs / 1e6
		mbs = fmt.Sprintf("%.1f", float64(wrs)*float64(size)/secs/1e6)
	}
	if vary {
		// the opcodes move different sizes (an atomic's 8 bytes, -s)
		bytes, mbs = "-", "-"
	}
	lat := "-"
	if latN > 0 {
		lat = fmt.Sprintf("%.2f", latNS/float64(latN)/1000)
	}
	fmt.Fprintf(w, " %-8s %-12d %-10d %-7d %-7s %-10.3f %-10s %-12.1f %-12s\n",
		bytes, wrs, c.PostList, c.CQMod, inl, mops, mbs, postNS/n, lat)
	if vary {
		fmt.Fprintf(w, " #bytes, MB/s: not one size (-s %d for some opcodes, 8 B for the atomics)\n", c.Size)
	}
	fmt.Fprintln(w, line)
	for _, q := range r.QPs {
		k := q.Counters
		fmt.Fprintf(w, " QP %#x %s: max_send_wr %d, max_inline_data %d | WRs %d, post calls %d, inline %d, signaled %d, CQEs polled %d, peak outstanding %d\n",
			k.QPNum, q.Type, k.MaxSendWR, k.MaxInlineData, k.WRs, k.PostCalls, k.Inline, k.Signaled, k.CQEsPolled, k.PeakOutstanding)
		if q.HCATruth {
			fmt.Fprintf(w, "   HCA: doorbells %d (BlueFlame %d), WQEBBs %d, DMA reads: WQE %d, payload %d; DMA writes: responses %d (%d B), CQEs %d\n",
				k.Doorbells, k.BFWrites, k.WQEBBs, k.DMAReadsWQE, k.DMAReadsPayload, k.DMAWritesResponse, k.DMABytesResponse, k.CQEWrites)
		}
		if r := q.Receiver; r != nil && q.SRQ != nil {
			fmt.Fprintf(w, "   receiver QP %#x: receives of SRQ %#x taken by SENDs %d, completions polled %d; SENDs that met an empty SRQ %d (RNR retries exhausted %d)\n",
				r.QPNum, q.SRQ.Addr, r.RecvsConsumed, r.RecvCQEsPolled, k.RNRWaits, k.RNRRetryExc)
		} else if r != nil {
			fmt.Fprintf(w, "   receiver QP %#x: receives posted %d, taken by SENDs %d, completions polled %d; SENDs that met an empty RQ %d (RNR retries exhausted %d)\n",
				r.QPNum, r.PostRecvs, r.RecvsConsumed, r.RecvCQEsPolled, k.RNRWaits, k.RNRRetryExc)
		}
		if cq := q.CQ; cq != nil && c.SharedCQ {
			fmt.Fprintf(w, "   send CQ %#x (shared by the thread's QPs): polls %d (empty %d), completions %d\n", cq.Addr, cq.Polls, cq.EmptyPolls, cq.CQEs)
		}
		if s := q.SRQ; s != nil {
			fmt.Fprintf(w, "   SRQ %#x (shared by the thread's receivers): receives posted %d, %d of them not yet completed and polled\n", s.Addr, s.Posted, s.Outstanding)
		}
		for _, s := range q.diagnosis(c) {
			fmt.Fprintf(w, "   %s\n", s)
		}
	}
	if r.Stopped {
		fmt.Fprintln(w, " stopped early by signal: counts cover the WRs attempted so far")
	}
}

// diagnosis explains failures in the application's words.
func (q QPResult) diagnosis(c Config) []string {
	k, a := q.Counters, q.App
	var out []string
	failed := a.ENOMEM + a.EINVAL + a.OtherErrors
	if k.CQOverrunErrs > 0 {
		out = append(out, "CQ OVERRUN: a completion was due on the full send CQ: the CQ went to error and the QP to the error state (fault cq-overrun)")
	}
	switch {
	case a.StalledUnsignaled > 0:
		out = append(out, fmt.Sprintf("STALLED after %d of the WRs: %d WRs outstanding and none signaled (a failed list dropped its signaled WR), so no CQE can free room for a list of %d under -t %d: an application waiting for room hangs here",
			a.Attempts, a.StalledUnsignaled, c.PostList, c.TxDepth))
	case a.Stalled:
		out = append(out, "STALLED: no completion came for the drain timeout while the application's own limit held it: the run stopped")
	}
	if failed == 0 {
		if a.Undrained > 0 {
			out = append(out, fmt.Sprintf("WARNING: %d signaled WR(s) never completed within the drain timeout", a.Undrained))
		}
		if a.CQEErrors > 0 {
			out = append(out, fmt.Sprintf("WARNING: %d completion(s) with error status", a.CQEErrors))
		}
		return out
	}
	first := "?"
	if a.FirstErrno != 0 {
		first = syscall.Errno(a.FirstErrno).Error()
	}
	if k.ENOMEMSQFull > 0 {
		s := fmt.Sprintf("SQ OVERFLOW: %d post call(s) failed with ENOMEM (SQ full), %d WR(s) accepted in all; the first failure came at WR #%d with the SQ holding max_send_wr %d",
			k.ENOMEMSQFull, k.WRs, a.FirstErrorAt, k.MaxSendWR)
		if q.App.FaultStartSeconds > 0 {
			s += fmt.Sprintf("; the fault began %.2f s (WR #%d) into the run", q.App.FaultStartSeconds, q.App.FaultStartWR)
		}
		switch q.App.Fault {
		case FaultNeverSignal.String():
			if c.SigAll {
				s += "; sq_sig_all made every WR signaled anyway"
			} else {
				s += "; no WR was signaled from then on, so no CQE retired a WQE (fault never-signal)"
			}
		case FaultLazyPoll.String():
			s += fmt.Sprintf("; CQEs were polled only every %d post calls, too rarely to retire WQEs in time (fault lazy-poll)", c.LazyPoll)
		case FaultRQStarve.String():
			s += "; the receiver posted no new receives, so the SENDs waited on RNR retries (fault rq-starve)"
		}
		out = append(out, s)
	}
	if k.ENOMEMInline > 0 {
		out = append(out, fmt.Sprintf("INLINE TOO BIG: %d post call(s) failed with ENOMEM: %d B inline > max_inline_data %d",
			k.ENOMEMInline, q.WRSize, k.MaxInlineData))
	}
	if k.NotRTS > 0 {
		out = append(out, fmt.Sprintf("QP NOT IN RTS: %d post call(s) refused (ENOMEM through post_send's SGE check, EINVAL through wr_complete) on a QP left in RTR (fault post-before-rts)", k.NotRTS))
	}
	if k.ENOMEMSGE > 0 {
		out = append(out, fmt.Sprintf("TOO MANY SGES: %d post call(s) failed with ENOMEM: num_sge %d > max_send_sge %d",
			k.ENOMEMSGE, q.NumSGE, q.Caps.MaxSendSGE))
	}
	if (k.EINVAL > 0 || a.EINVAL > 0) && k.EINVAL != k.NotRTS {
		out = append(out, fmt.Sprintf("EINVAL: %d post call(s) rejected (bad opcode or QP state)", max(k.EINVAL, a.EINVAL)))
	}
	if a.OtherErrors > 0 {
		out = append(out, fmt.Sprintf("%d post call(s) failed with other errors (first: %s)", a.OtherErrors, first))
	}
	return out
}
