package trace

// The fields of each kind of record, after the common header, described
// once: recordCodec.fields walks them in the order they are stored, and the
// same walk encodes an event (each field's value appended to the body) and
// decodes one (each field read from the body into the event). The letters
// in codec.go's table name the recordCodec method that stores a field: u
// u64, u32 or u16 (by the field's width), z z32, b u8, ? bool, s str.
//
// A field is added here and only here, at the end of its kind, in a group
// behind recordCodec.appended: a record stores its appended groups up to
// the last one that is set, so a record without the new field is stored
// as before, and a reader reads the groups it finds (appended says whether
// to walk a group).

// fields walks the fields of ev; ev is a non-nil event of one of the
// concrete types (eventHeader checked it, or decoder.newEvent made it).
func (c *recordCodec) fields(ev Event) {
	switch e := ev.(type) {
	case *QPCreate:
		c.u64(&e.QP)
		c.u32(&e.QPNum)
		c.u8((*uint8)(&e.Type))
		c.bool(&e.SigAll)
		c.u64(&e.SendCQ)
		c.u64(&e.RecvCQ)
		c.u32(&e.Caps.MaxSendWR)
		c.u32(&e.Caps.MaxRecvWR)
		c.u32(&e.Caps.MaxSendSGE)
		c.u32(&e.Caps.MaxRecvSGE)
		c.u32(&e.Caps.MaxInlineData)
		c.str(&e.Via)
		if c.appended(e.Gen != 0) {
			c.u64(&e.Gen)
		}
		if c.appended(e.Lib != "") {
			c.str(&e.Lib)
		}
		if c.appended(e.State != 0) {
			c.z32(&e.State)
		}
		if c.appended(e.Window) {
			c.bool(&e.Window)
		}
	case *QPDestroy:
		c.u64(&e.QP)
		c.u32(&e.QPNum)
		c.z32(&e.Ret)
		if c.appended(e.Gen != 0) {
			c.u64(&e.Gen)
		}
	case *QPModify:
		c.u64(&e.QP)
		c.u32(&e.QPNum)
		c.z32(&e.State)
		c.z32(&e.Ret)
	case *Post:
		next := c.qp(&e.QP, &e.QPNum)
		if c.opts() {
			c.optU8((*uint8)(&e.API))
			c.optBool(&e.Aborted)
			c.optU32(&e.Truncated)
			c.optZ32(&e.Ret)
			c.optEnd()
		}
		c.u32(&e.Accepted)
		c.entry(&e.EntryNS, e.TimeNS)
		c.wrList(&e.WRs, next)
		if c.appended(e.WalkCapped || c.cutsSet(e.WRs)) {
			c.bool(&e.WalkCapped)
			c.cuts(e.WRs)
		}
	case *Poll:
		next := c.cq(&e.CQ)
		c.z32(&e.Max)
		c.z32(&e.Ret)
		c.u32(&e.Truncated)
		c.varyingU(&e.EmptyBefore)
		c.entry(&e.EntryNS, e.TimeNS)
		c.wcList(&e.WCs, next)
		if c.appended(e.Ex) {
			c.bool(&e.Ex)
		}
	case *EmptyPolls:
		c.cq(&e.CQ)
		c.u64(&e.Count)
		if c.appended(e.Gen != 0) {
			c.u64(&e.Gen)
		}
	case *PostRecv:
		c.qp(&e.QP, &e.QPNum)
		c.u32(&e.NumWRs)
		c.z32(&e.Ret)
		c.u32(&e.Accepted)
		if c.appended(e.SRQ) {
			c.bool(&e.SRQ)
		}
	case *Lost:
		c.u64(&e.Count)
	case *Exit:
		c.z32(&e.Code)
		c.z32(&e.Signal)
	case *Attach:
		c.str(&e.Func)
		c.str(&e.Path)
		c.u64(&e.Offset)
		c.str(&e.How)
		c.str(&e.Err)
		if c.appended(e.DebugFile != "") {
			c.str(&e.DebugFile)
		}
	case *QPCounters:
		c.u64(&e.QP)
		c.u32(&e.QPNum)
		for _, p := range [...]*uint64{&e.PostCalls, &e.WRs, &e.Inline, &e.Signaled,
			&e.Doorbells, &e.Errors, &e.ENOMEM, &e.EINVAL, &e.InlineBytes,
			&e.PayloadBytes, &e.PayloadSGEs, &e.WRsPerCallMax} {
			c.u64(p)
		}
		if c.appended(e.WalkCappedPosts|e.SGECutWRs|e.SGEsNotSummed != 0) {
			c.u64(&e.WalkCappedPosts)
			c.u64(&e.SGECutWRs)
			c.u64(&e.SGEsNotSummed)
		}
		if c.appended(e.Gen != 0) {
			c.u64(&e.Gen)
		}
		if c.appendedFlag(&e.RecvsCounted) {
			c.u64(&e.RecvCalls)
			c.u64(&e.Recvs)
			c.u64(&e.RecvFailed)
		}
		if c.appendedFlag(&e.SQ.Kept) {
			c.sqModel(&e.SQ)
		}
	case *CQCounters:
		c.u64(&e.CQ)
		c.u64(&e.Polls)
		c.u64(&e.CQEs)
		c.u64(&e.Empty)
		if c.appended(e.Gen != 0) {
			c.u64(&e.Gen)
		}
		if c.appended(e.ExCQEs != 0) {
			c.u64(&e.ExCQEs)
		}
	case *CQCreate:
		c.u64(&e.CQ)
		c.u64(&e.Gen)
		c.u32(&e.CQE)
	case *SRQCreate:
		c.u64(&e.SRQ)
		c.u64(&e.Gen)
		c.u32(&e.MaxWR)
	case *SRQDestroy:
		c.u64(&e.SRQ)
		c.u64(&e.Gen)
		c.z32(&e.Ret)
	case *End:
		c.str(&e.Reason)
		c.bool(&e.Err)
		if c.appended(e.CutNS != 0) {
			c.u64(&e.CutNS)
			c.u64(&e.InFlightUnseen)
		}
	case *CQChange:
		c.u8((*uint8)(&e.Op))
		c.u64(&e.CQ)
		c.z32(&e.CQE)
		c.u32(&e.ModMask)
		c.u16(&e.ModCount)
		c.u16(&e.ModPeriodUS)
		c.z32(&e.Ret)
		c.str(&e.Via)
	case *Scan:
		c.u64(&e.Bytes)
		c.u32(&e.Mappings)
		c.u64(&e.DurationNS)
		c.u32(&e.Contexts)
		c.u32(&e.QPs)
		c.u64(&e.StopNS)
		c.str(&e.Cut)
		c.str(&e.Err)
		if c.appended(e.KernelCheck != "") {
			c.str(&e.KernelCheck)
		}
	case *Proc:
		c.str(&e.How)
		c.u32(&e.Parent)
		c.str(&e.Comm)
	case *PostFail:
		c.u64(&e.QP)
		c.u32(&e.QPNum)
		c.str(&e.Func)
		c.z32(&e.Errno)
		c.z32(&e.State)
		c.u64(&e.Site)
		c.str(&e.SiteCauses)
		c.bool(&e.HasWR)
		c.u64(&e.WR.ID)
		c.u8(&e.WR.Opcode)
		c.u32(&e.WR.Flags)
		c.u32(&e.WR.NumSGE)
		c.u32(&e.WR.Bytes)
		c.u8(&e.WR.SGEsNotSummed)
		c.bool(&e.Traced)
		if c.appendedFlag(&e.Counted) {
			c.u32(&e.Accepted)
			c.bool(&e.WalkCapped)
			c.bool(&e.SQ.Kept)
			c.sqModel(&e.SQ)
		}
	case *Window:
		c.u64(&e.FromNS)
		c.u32(&e.PIDs)
		c.u64(&e.PeriodNS)
		c.u64(&e.Runs)
		c.u64(&e.RunNS)
		c.u64(&e.Traps)
		c.u64(&e.TrapNS)
		c.u64(&e.TargetCPUNS)
		c.str(&e.CostErr)
		c.str(&e.CostNote)
		c.u32(&e.BudgetPPM)
		c.u64(&e.NextNS)
		c.bool(&e.Tail)
	case *SQSample:
		c.u64(&e.QP)
		c.u32(&e.QPNum)
		c.u64(&e.Posted)
		c.u64(&e.Retired)
		c.u8(&e.Width)
		c.u32(&e.Capacity)
		c.bool(&e.PostedCountsRefused)
		if c.appended(e.CQErrorsRead) {
			c.bool(&e.CQErrorsRead)
			c.u64(&e.CQErrors)
		}
		if c.appended(e.SignaledRead) { // not a flag group: one follows
			c.bool(&e.SignaledRead)
			c.u64(&e.Signaled)
			c.u64(&e.SendCQEsPolled)
		}
		if c.appendedFlag(&e.CQRingRead) { // the last group
			c.u32(&e.CQFill)
			c.u32(&e.CQCapacity)
		}
	}
	c.end()
}

// wr walks a WR of a post's list given the one before it (nil for the
// first).
func (c *recordCodec) wr(wr, prev *WR) {
	var scratch WR
	def := elemDefaultIn(c, wr, &scratch)
	def.follow(prev)
	if elemDefault(c, wr, def) {
		return
	}
	c.elemDelta(&wr.ID, def.ID)
	c.elemU8(&wr.Opcode, def.Opcode)
	c.elemU32(&wr.Flags, def.Flags)
	c.elemU32(&wr.NumSGE, def.NumSGE)
	c.elemU32(&wr.Bytes, def.Bytes)
	c.elemEnd()
}

// follow makes wr the default of the WR after prev (nil: of the first):
// the next wr_id, the same fields, SGEsNotSummed 0 (a post stores it with
// its cuts). It sets field by field, so that the element it is made in can
// be read back at once.
func (wr *WR) follow(prev *WR) {
	if prev == nil {
		*wr = WR{ID: 1}
		return
	}
	wr.ID = prev.ID + 1
	wr.Opcode = prev.Opcode
	wr.Flags = prev.Flags
	wr.NumSGE = prev.NumSGE
	wr.Bytes = prev.Bytes
	wr.SGEsNotSummed = 0
}

// wc walks a WC of a poll's list given the one before it, as wr does.
func (c *recordCodec) wc(wc, prev *WC) {
	var scratch WC
	def := elemDefaultIn(c, wc, &scratch)
	def.follow(prev)
	if elemDefault(c, wc, def) {
		return
	}
	c.elemDelta(&wc.ID, def.ID)
	c.elemU8(&wc.Status, def.Status)
	c.elemU8(&wc.Opcode, def.Opcode)
	c.elemU32(&wc.ByteLen, def.ByteLen)
	c.elemU32(&wc.QPNum, def.QPNum)
	c.elemEnd()
}

// follow makes wc the default of the WC after prev, as WR.follow does.
func (wc *WC) follow(prev *WC) {
	if prev == nil {
		*wc = WC{ID: 1}
		return
	}
	wc.ID = prev.ID + 1
	wc.Status = prev.Status
	wc.Opcode = prev.Opcode
	wc.ByteLen = prev.ByteLen
	wc.QPNum = prev.QPNum
}

// sqModel walks a kernel send-queue model (QPCounters, PostFail).
func (c *recordCodec) sqModel(m *SQModel) {
	for _, p := range [...]*uint64{&m.Posted, &m.Retired, &m.Peak, &m.LongestRun, &m.CurRun,
		&m.Signaled, &m.SigOutstanding, &m.OldestSigNS, &m.SendCQEs, &m.CQEErrors,
		&m.Unmatched, &m.Unkept, &m.FailRepeats, &m.SendCQ, &m.WCsPast, &m.Full, &m.FirstRun} {
		c.u64(p)
	}
	for _, p := range [...]*bool{&m.Synced, &m.SigAll, &m.Err, &m.IDsRepeat, &m.WRAPI} {
		c.bool(p)
	}
}
