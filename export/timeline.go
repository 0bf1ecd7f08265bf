package export

import "strconv"

// What the exporter hands a format writer: slices, instants, counter
// samples and folded failures, already filtered, in the order the events
// came (a folded burst is handed over when it ends, after events that came
// during it).

// argKind says how an argument's value is shown.
type argKind uint8

const (
	argUint argKind = iota
	argInt
	argHex // an address or a QP number
	argStr
	argBool
)

// arg is one argument of a slice or an instant (a debug annotation in
// Perfetto, an args entry in Chrome JSON).
type arg struct {
	key  string
	kind argKind
	u    uint64
	i    int64
	s    string
}

func uintArg(k string, v uint64) arg { return arg{key: k, kind: argUint, u: v} }
func intArg(k string, v int64) arg   { return arg{key: k, kind: argInt, i: v} }
func hexArg(k string, v uint64) arg  { return arg{key: k, kind: argHex, u: v} }
func strArg(k, v string) arg         { return arg{key: k, kind: argStr, s: v} }
func boolArg(k string, v bool) arg {
	var u uint64
	if v {
		u = 1
	}
	return arg{key: k, kind: argBool, u: u}
}

// counterKind names a per-QP counter track.
type counterKind uint8

const (
	ctrOutstanding counterKind = iota // WRs outstanding, by the model
	ctrFailures                       // failed post calls per second
	ctrDoorbells                      // doorbells per second
	ctrInline                         // % of the WRs posted that were inline
	ctrPCIeSaved                      // PCIe bytes saved per second
	numCounterKinds
)

// counterInfo names each counter track: its title after "QP 0x.. ", the
// Chrome series name, and whether its values are whole numbers.
var counterInfo = [numCounterKinds]struct {
	title, series string
	integer       bool
}{
	ctrOutstanding: {"outstanding WRs", "outstanding", true},
	ctrFailures:    {"post failures/s", "failures_per_s", false},
	ctrDoorbells:   {"doorbells/s", "doorbells_per_s", false},
	ctrInline:      {"inline share %", "inline_pct", false},
	ctrPCIeSaved:   {"PCIe bytes saved/s", "pcie_bytes_saved_per_s", false},
}

// counterValue is one sample of a QP's counter.
type counterValue struct {
	pid, qpn uint32
	kind     counterKind
	v        float64
	slot     *trackSlots // where a writer may keep the QP's track ids; may be nil
}

// trackSlots hold a writer's track ids of one QP's counters.
type trackSlots [numCounterKinds]uint64

// itemKind is what an item draws.
type itemKind uint8

const (
	itemSlice   itemKind = iota // from ts for dur
	itemInstant                 // at ts, on the thread
	itemProcess                 // at ts, process-wide (diagnoses)
	itemGlobal                  // at ts, for the whole trace (lost events)
)

// item is one slice or instant, with the counter values that change at
// its end.
type item struct {
	kind     itemKind
	name     string
	cat      string
	pid, tid uint32
	ts, dur  uint64
	args     []arg
	counters []counterValue
}

// burst is a run of failed post calls on one QP with the same cause,
// folded into one slice.
type burst struct {
	pid, tid, qpn uint32
	ret           int32
	cause         string // "SQ full", "inline data too big", ...
	first, last   uint64 // the first call's entry (or return), the last one's return
	count         uint64 // failed calls
	refused       uint64 // WRs not posted
}

func (b *burst) name() string { return "post failed: " + causeTitle(b.ret, b.cause) }

// timeline is a format writer.
type timeline interface {
	item(it *item)
	counter(ts uint64, c counterValue)
	burst(b *burst)
	close() error
}

func hex(v uint64) string { return "0x" + strconv.FormatUint(v, 16) }
