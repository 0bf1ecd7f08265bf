package export

import (
	"bufio"
	"encoding/json"
	"io"
	"strconv"
	"unicode/utf8"

	"github.com/sqscope/sqscope/trace"
)

// chromeWriter streams a Chrome trace-event JSON object (Perfetto and
// chrome://tracing read it): nothing is held but the set of processes
// already named. Times are microseconds with nanosecond decimals.
type chromeWriter struct {
	bw    *bufio.Writer
	b     []byte // the event being written
	n     int
	named map[uint32]bool
	fi    *trace.FileInfo
	names procNames
	err   error
}

func newChrome(w io.Writer, o *Options, names procNames) *chromeWriter {
	fi := &o.Info
	meta := map[string]string{"recording": o.Recording, "sqscope_version": o.Version, "clock": "CLOCK_MONOTONIC"}
	for k, v := range map[string]string{"hostname": fi.Hostname, "kernel": fi.Kernel, "target": fi.Target, "recorded_by": fi.Version} {
		if v != "" {
			meta[k] = v
		}
	}
	c := &chromeWriter{bw: bufio.NewWriterSize(w, 256<<10), named: map[uint32]bool{}, fi: fi, names: names}
	m, _ := json.Marshal(meta)
	c.bw.WriteString(`{"displayTimeUnit":"ns","otherData":`)
	c.bw.Write(m)
	c.bw.WriteString(",\"traceEvents\":[\n")
	return c
}

// appendUsec writes ns as microseconds with ns precision, without
// rounding through a float.
func appendUsec(b []byte, ns uint64) []byte {
	b = strconv.AppendUint(b, ns/1000, 10)
	frac := ns % 1000
	return append(b, '.', byte('0'+frac/100), byte('0'+frac/10%10), byte('0'+frac%10))
}

// appendString writes s as a JSON string.
func appendString(b []byte, s string) []byte {
	if !utf8.ValidString(s) {
		m, _ := json.Marshal(s) // replaces the invalid bytes
		return append(b, m...)
	}
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20:
			b = append(b, `\u00`...)
			b = append(b, "0123456789abcdef"[c>>4], "0123456789abcdef"[c&15])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// begin starts an event: name, cat, ph, ts, pid, tid.
func (c *chromeWriter) begin(name, cat, ph string, ts uint64, pid, tid uint32) {
	c.beginName(ph, ts, pid, tid, func(b []byte) []byte { return appendString(b, name) }, cat)
}

// beginName is begin with the name written by name.
func (c *chromeWriter) beginName(ph string, ts uint64, pid, tid uint32, name func([]byte) []byte, cat string) {
	if !c.named[pid] {
		c.named[pid] = true
		pname := c.names.name(c.fi, pid, true)
		c.begin("process_name", "", "M", 0, pid, 0)
		c.b = append(c.b, `,"args":{"name":`...)
		c.b = appendString(c.b, pname)
		c.end("}")
	}
	b := name(append(c.b[:0], `{"name":`...))
	if cat != "" {
		b = append(b, `,"cat":"`...)
		b = append(b, cat...)
		b = append(b, '"')
	}
	b = append(b, `,"ph":"`...)
	b = append(b, ph...)
	b = append(b, `","ts":`...)
	b = appendUsec(b, ts)
	b = append(b, `,"pid":`...)
	b = strconv.AppendUint(b, uint64(pid), 10)
	b = append(b, `,"tid":`...)
	c.b = strconv.AppendUint(b, uint64(tid), 10)
}

// end closes the event after tail and writes it.
func (c *chromeWriter) end(tail string) {
	if c.err != nil {
		return
	}
	if c.n > 0 {
		c.bw.WriteString(",\n")
	}
	c.b = append(c.b, tail...)
	c.b = append(c.b, '}')
	_, c.err = c.bw.Write(c.b)
	c.n++
}

func (c *chromeWriter) args(args []arg) {
	if len(args) == 0 {
		return
	}
	b := append(c.b, `,"args":{`...)
	for i, a := range args {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, a.key)
		b = append(b, ':')
		switch a.kind {
		case argUint:
			b = strconv.AppendUint(b, a.u, 10)
		case argInt:
			b = strconv.AppendInt(b, a.i, 10)
		case argHex:
			b = append(b, `"0x`...)
			b = strconv.AppendUint(b, a.u, 16)
			b = append(b, '"')
		case argStr:
			b = appendString(b, a.s)
		case argBool:
			b = strconv.AppendBool(b, a.u != 0)
		}
	}
	c.b = append(b, '}')
}

var scopes = [...]string{itemInstant: "t", itemProcess: "p", itemGlobal: "g"}

func (c *chromeWriter) item(it *item) {
	ph := "i"
	if it.kind == itemSlice {
		ph = "X"
	}
	c.begin(it.name, it.cat, ph, it.ts, it.pid, it.tid)
	if it.kind == itemSlice {
		c.b = append(c.b, `,"dur":`...)
		c.b = appendUsec(c.b, it.dur)
	} else {
		c.b = append(c.b, `,"s":"`...)
		c.b = append(c.b, scopes[it.kind]...)
		c.b = append(c.b, '"')
	}
	c.args(it.args)
	c.end("")
	for _, v := range it.counters {
		c.counter(it.ts+it.dur, v)
	}
}

// appendCounterName writes the name of a QP's counter track.
func appendCounterName(b []byte, v counterValue) []byte {
	if v.kind == ctrOutstanding {
		b = append(b, `"SQ occupancy QP 0x`...)
		b = strconv.AppendUint(b, uint64(v.qpn), 16)
		return append(b, '"')
	}
	b = append(b, `"QP 0x`...)
	b = strconv.AppendUint(b, uint64(v.qpn), 16)
	b = append(b, ' ')
	b = append(b, counterInfo[v.kind].title...)
	return append(b, '"')
}

func (c *chromeWriter) counter(ts uint64, v counterValue) {
	c.beginName("C", ts, v.pid, v.pid, func(b []byte) []byte { return appendCounterName(b, v) }, "sq")
	c.b = append(c.b, `,"args":{"`...)
	c.b = append(c.b, counterInfo[v.kind].series...)
	c.b = append(c.b, `":`...)
	if counterInfo[v.kind].integer {
		c.b = strconv.AppendInt(c.b, int64(v.v), 10)
	} else {
		c.b = strconv.AppendFloat(c.b, v.v, 'f', -1, 64)
	}
	c.end("}")
}

func burstArgs(b *burst) []arg {
	args := []arg{hexArg("qp_num", uint64(b.qpn)), intArg("ret", int64(b.ret)), uintArg("count", b.count),
		uintArg("wrs_refused", b.refused)}
	if b.cause != "" {
		args = append(args, strArg("cause", b.cause))
	}
	return args
}

// burst draws one failure as an instant, a run of them as an async slice
// of its own (runs of two QPs on one thread may overlap).
func (c *chromeWriter) burst(b *burst) {
	if b.count == 1 && b.first == b.last {
		c.item(&item{kind: itemInstant, name: b.name(), cat: "error", pid: b.pid, tid: b.tid, ts: b.first, args: burstArgs(b)})
		return
	}
	id := `,"id":"` + hex(uint64(b.pid)<<32|uint64(b.qpn)) + `"`
	c.begin(b.name(), "error", "b", b.first, b.pid, b.tid)
	c.b = append(c.b, id...)
	c.args(burstArgs(b))
	c.end("")
	c.begin(b.name(), "error", "e", b.last, b.pid, b.tid)
	c.end(id)
}

func (c *chromeWriter) close() error {
	if c.err != nil {
		return c.err
	}
	c.bw.WriteString("\n]}\n")
	return c.bw.Flush()
}
