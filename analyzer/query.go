package analyzer

// QPCounters returns one QP's counters as a snapshot would show them (its
// send CQ's poll counts left out), without copying the rest of the state:
// for sinks that sample a few QPs often.
func (a *Analyzer) QPCounters(pid, qpNum uint32) (Counters, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	q, ok := a.qps[qpKey{pid, qpNum}]
	if !ok {
		return Counters{}, false
	}
	return q.counters(), true
}

// counters are the QP's counters with those derived from them filled in.
func (q *sq) counters() Counters {
	var c Counters
	q.countersTo(&c)
	return c
}

// countersTo is counters written into c, without a copy in between (a
// snapshot of thousands of QPs writes them in place).
func (q *sq) countersTo(c *Counters) {
	*c = q.c
	c.CQEWrites = c.Signaled + c.FlushedUnsignaled - q.cqesLost()
}

// Savings is the PCIe picture of the counters, as a snapshot computes it.
func (c *Counters) Savings() Savings { return savings(c) }
