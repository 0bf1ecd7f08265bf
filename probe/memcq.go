package probe

import "unsafe"

// The send CQ of an rxe QP is a ring the kernel maps to user space, as
// its send queue is: librxe keeps the ring's pointer in struct rxe_cq
// (rdma-core 44: past a struct verbs_cq and a struct mminfo), the kernel
// writes completions at its producer index and librxe polls them from
// its consumer index (struct rxe_queue_buf, the kernel's ABI). A ring
// read full holds no more: rxe drops the next completion due on it
// (raising IBV_EVENT_CQ_ERR on the async event file) and the QP goes on,
// which no post's failure shows. A read cannot tell that from a CQ run
// exactly full by an application that expects no more completions, so a
// full read is no diagnosis: it traces the process in full (an
// escalation window), whose completions tell the dropped ones (the
// analyzer's cqSkipped). Once per CQ: a healthy application that runs
// its CQ full again and again pays for one window, not one each time.

// rxeCQQueueOff is the offset of struct rxe_cq's queue pointer.
const rxeCQQueueOff = 0x130

// memCQ is a send CQ whose ring is read (rxe), once per round whatever
// the QPs that report to it.
type memCQ struct {
	rxeRing               // bad: it failed the check, not read
	full           bool   // read full at its last read
	escalated      bool   // a full read has traced its process in full
	fill, capacity uint32 // at its last read
	round          uint64 // the round of its last read
	err            error
}

// sendCQ reads the ring of the send CQ at address cq of process pid in
// this round (once, whatever the QPs that report to it), and says
// whether it was read full for the first time.
func (m *memSampler) sendCQ(pid uint32, cq uint64) (c *memCQ, firstFull bool) {
	k := pidAddr{pid, cq}
	m.mu.Lock()
	c = m.cqs[k]
	if c == nil {
		c = &memCQ{}
		m.cqs[k] = c
	}
	m.mu.Unlock()
	if c.round == m.rounds || c.bad {
		return c, false
	}
	c.round = m.rounds
	fill, capacity, err := readCQRing(int(pid), cq, c)
	c.err = err
	if err != nil {
		return c, false
	}
	c.fill, c.capacity, c.full = fill, capacity, fill == capacity
	if !c.full || c.escalated {
		return c, false
	}
	c.escalated = true
	return c, true
}

// readCQRing reads the producer index of a CQ's ring, then its consumer
// index (in that order: the fill read is never above the ring's at any
// one time), and gives the completions it holds unpolled and the most it
// holds (its index mask: one slot of a power of two is kept empty). The
// ring is checked as a send queue's is (rxeRing).
func readCQRing(pid int, cq uint64, c *memCQ) (fill, capacity uint32, err error) {
	var ring uint64
	if err := readWords(pid, word{unsafe.Pointer(&ring), cq + rxeCQQueueOff, 8}); err != nil {
		return 0, 0, err
	}
	mask, prod, cons, err := c.indices(pid, ring, 0, true, "CQ ring")
	if err != nil {
		return 0, 0, err
	}
	return (prod - cons) & mask, mask, nil
}
