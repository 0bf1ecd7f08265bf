package export

import (
	"io"
	"math"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	pb "github.com/sqscope/sqscope/export/perfetto"
)

// The Perfetto writer streams a Trace: each TracePacket is appended as
// field 1 of the file, so nothing is held but the tracks defined and the
// strings interned. Track descriptors and the rare packets are marshalled
// from the generated types; the packets written per event are appended
// with protowire, with field numbers taken from the generated descriptors
// so that they cannot drift from the schema.

func fieldNum(m proto.Message, name string) protowire.Number {
	f := m.ProtoReflect().Descriptor().Fields().ByName(protoreflect.Name(name))
	if f == nil {
		panic("perfetto schema: no field " + name)
	}
	return f.Number()
}

var (
	fTracePacket  = fieldNum(&pb.Trace{}, "packet")
	fTimestamp    = fieldNum(&pb.TracePacket{}, "timestamp")
	fSeqID        = fieldNum(&pb.TracePacket{}, "trusted_packet_sequence_id")
	fSeqFlags     = fieldNum(&pb.TracePacket{}, "sequence_flags")
	fInterned     = fieldNum(&pb.TracePacket{}, "interned_data")
	fTrackEvent   = fieldNum(&pb.TracePacket{}, "track_event")
	fType         = fieldNum(&pb.TrackEvent{}, "type")
	fTrackUUID    = fieldNum(&pb.TrackEvent{}, "track_uuid")
	fNameIID      = fieldNum(&pb.TrackEvent{}, "name_iid")
	fCategoryIIDs = fieldNum(&pb.TrackEvent{}, "category_iids")
	fCounterValue = fieldNum(&pb.TrackEvent{}, "counter_value")
	fDoubleValue  = fieldNum(&pb.TrackEvent{}, "double_counter_value")
	fExtraUUIDs   = fieldNum(&pb.TrackEvent{}, "extra_counter_track_uuids")
	fExtraValues  = fieldNum(&pb.TrackEvent{}, "extra_counter_values")
	fAnnotations  = fieldNum(&pb.TrackEvent{}, "debug_annotations")
	fAnnNameIID   = fieldNum(&pb.DebugAnnotation{}, "name_iid")
	fAnnUint      = fieldNum(&pb.DebugAnnotation{}, "uint_value")
	fAnnInt       = fieldNum(&pb.DebugAnnotation{}, "int_value")
	fAnnPointer   = fieldNum(&pb.DebugAnnotation{}, "pointer_value")
	fAnnBool      = fieldNum(&pb.DebugAnnotation{}, "bool_value")
	fAnnString    = fieldNum(&pb.DebugAnnotation{}, "string_value")
	fAnnStringIID = fieldNum(&pb.DebugAnnotation{}, "string_value_iid")
)

// Field keys, encoded once.
var (
	tTimestamp    = varintTag(fTimestamp)
	tType         = varintTag(fType)
	tTrackUUID    = varintTag(fTrackUUID)
	tNameIID      = varintTag(fNameIID)
	tCategoryIIDs = varintTag(fCategoryIIDs)
	tCounterValue = varintTag(fCounterValue)
	tExtraUUIDs   = varintTag(fExtraUUIDs)
	tExtraValues  = varintTag(fExtraValues)
	tAnnotations  = protowire.AppendTag(nil, fAnnotations, protowire.BytesType)
	tAnnNameIID   = varintTag(fAnnNameIID)
	tTrackEvent   = protowire.AppendTag(nil, fTrackEvent, protowire.BytesType)
	tTracePacket  = protowire.AppendTag(nil, fTracePacket, protowire.BytesType)
	annTags       = [...][]byte{argUint: varintTag(fAnnUint), argInt: varintTag(fAnnInt), argHex: varintTag(fAnnPointer),
		argBool: varintTag(fAnnBool), argStr: varintTag(fAnnStringIID)}
	// what follows the timestamp in every track-event packet: the
	// sequence, and that it needs the sequence's interned strings
	seqNeedsPrefix = field(field(nil, varintTag(fSeqID), seqID), varintTag(fSeqFlags), uint64(seqNeeds))
)

// packetHead starts a packet: its field key and a byte for its length,
// then the key of its timestamp.
var packetHead = append(append(append([]byte(nil), tTracePacket...), 0), tTimestamp...)

// eventHeads follow the timestamp, by event type: the sequence, the track
// event's key and a byte for its length, its type and the key of its
// track.
var eventHeads = func() (m [pb.TrackEvent_TYPE_STATE + 1][]byte) {
	for t := range m {
		typ := pb.TrackEvent_Type(t)
		b := append(append([]byte(nil), seqNeedsPrefix...), tTrackEvent...)
		b = field(append(b, 0), tType, uint64(typ))
		m[typ] = append(b, tTrackUUID...)
	}
	return m
}()

func varintTag(n protowire.Number) []byte { return protowire.AppendTag(nil, n, protowire.VarintType) }

// uv appends v as a varint; small values, the common case, take one byte.
func uv(b []byte, v uint64) []byte {
	if v < 0x80 {
		return append(b, byte(v))
	}
	return protowire.AppendVarint(b, v)
}

// field appends a varint field.
func field(b, tag []byte, v uint64) []byte { return uv(append(b, tag...), v) }

// seqID is the one packet sequence sqscope writes.
const seqID = 1

const (
	seqCleared = uint32(pb.TracePacket_SEQ_INCREMENTAL_STATE_CLEARED)
	seqNeeds   = uint32(pb.TracePacket_SEQ_NEEDS_INCREMENTAL_STATE)
)

// internTable gives strings their interning ids (from 1) and collects
// the ones new since the last packet. The first few strings, the names
// every event uses, are found by a scan that costs no hashing.
type internTable struct {
	hot   []string // ids 1..len(hot)
	ids   map[string]uint64
	fresh []string
}

const hotStrings = 24

func (t *internTable) id(s string) uint64 {
	for i, h := range t.hot {
		if h == s {
			return uint64(i + 1)
		}
	}
	if id, ok := t.ids[s]; ok {
		return id
	}
	if t.ids == nil {
		t.ids = map[string]uint64{}
	}
	id := uint64(len(t.hot) + len(t.ids) + 1)
	if len(t.hot) < hotStrings {
		t.hot = append(t.hot, s)
	} else {
		t.ids[s] = id
	}
	t.fresh = append(t.fresh, s)
	return id
}

// iid is the id of a string already interned.
func (t *internTable) iid(s string) uint64 {
	for i, h := range t.hot {
		if h == s {
			return uint64(i + 1)
		}
	}
	return t.ids[s]
}

// internedStrings: string argument values worth interning (causes,
// severities, names of statuses); messages are written as they are.
const maxInternedValue = 64

type perfettoWriter struct {
	w    io.Writer
	out  []byte // packets not yet written to w
	opts *Options
	err  error
	// the processes' command names (shared with the Exporter)
	procNames procNames
	// track uuids: processes, threads, per-QP counter and failure tracks
	nextUUID uint64
	procs    map[uint32]uint64
	threads  map[uint64]uint64 // pid<<32|tid
	counters map[counterKey]uint64
	failures map[qpKey]uint64
	// the last thread and counter track looked up
	lastThread, lastThreadUUID uint64
	lastCounter                counterKey
	lastCounterUUID            uint64
	global                     uint64
	names                      internTable
	cats                       internTable
	annNames                   internTable
	values                     internTable
	pkt                        []byte // scratch: the packet being written
	pktStart, teStart          int    // where the packet and its track event start
	hdr                        []byte // scratch: the packet's field header
	ann                        []byte
}

type counterKey struct {
	qpKey
	kind counterKind
}

func newPerfetto(w io.Writer, o *Options, names procNames) *perfettoWriter {
	p := &perfettoWriter{procNames: names, w: w, out: make([]byte, 0, outBuffer+64<<10), opts: o, procs: map[uint32]uint64{},
		threads: map[uint64]uint64{}, counters: map[counterKey]uint64{}, failures: map[qpKey]uint64{}}
	// The first packet clears the sequence's interning state; every later
	// one that uses interned ids says it needs it.
	p.global = p.uuid()
	fi := &o.Info
	desc := "sqscope " + o.Version + " export of " + o.Recording + "; times are CLOCK_MONOTONIC ns"
	if fi.Target != "" {
		desc += "; target: " + fi.Target
	}
	if fi.Hostname != "" {
		desc += "; host " + fi.Hostname
	}
	if fi.Kernel != "" {
		desc += ", kernel " + fi.Kernel
	}
	p.message(&pb.TracePacket{
		OptionalTrustedPacketSequenceId: &pb.TracePacket_TrustedPacketSequenceId{TrustedPacketSequenceId: seqID},
		SequenceFlags:                   proto.Uint32(seqCleared),
		FirstPacketOnSequence:           proto.Bool(true),
		Data: &pb.TracePacket_TrackDescriptor{TrackDescriptor: &pb.TrackDescriptor{Uuid: proto.Uint64(p.global),
			StaticOrDynamicName: &pb.TrackDescriptor_Name{Name: "sqscope"}, Description: proto.String(desc)}},
	})
	return p
}

func (p *perfettoWriter) uuid() uint64 { p.nextUUID++; return p.nextUUID }

// message writes a packet marshalled from the generated types.
func (p *perfettoWriter) message(m *pb.TracePacket) {
	if p.err != nil {
		return
	}
	if m.OptionalTrustedPacketSequenceId == nil {
		m.OptionalTrustedPacketSequenceId = &pb.TracePacket_TrustedPacketSequenceId{TrustedPacketSequenceId: seqID}
	}
	b, err := proto.Marshal(m)
	if err != nil {
		p.err = err
		return
	}
	p.write(b)
}

func (p *perfettoWriter) write(packet []byte) {
	if p.err != nil {
		return
	}
	p.hdr = uv(append(p.hdr[:0], tTracePacket...), uint64(len(packet)))
	p.out = append(append(p.out, p.hdr...), packet...)
	p.flush(outBuffer)
}

func (p *perfettoWriter) track(d *pb.TrackDescriptor) {
	p.message(&pb.TracePacket{Data: &pb.TracePacket_TrackDescriptor{TrackDescriptor: d}})
}

func (p *perfettoWriter) process(pid uint32) uint64 {
	if u, ok := p.procs[pid]; ok {
		return u
	}
	u := p.uuid()
	p.procs[pid] = u
	name := p.procNames.name(&p.opts.Info, pid, false)
	p.track(&pb.TrackDescriptor{Uuid: proto.Uint64(u),
		Process: &pb.ProcessDescriptor{Pid: proto.Int32(int32(pid)), ProcessName: proto.String(name)}})
	return u
}

func (p *perfettoWriter) thread(pid, tid uint32) uint64 {
	k := uint64(pid)<<32 | uint64(tid)
	if p.lastThreadUUID != 0 && p.lastThread == k {
		return p.lastThreadUUID
	}
	if u, ok := p.threads[k]; ok {
		p.lastThread, p.lastThreadUUID = k, u
		return u
	}
	parent := p.process(pid)
	u := p.uuid()
	p.threads[k] = u
	p.track(&pb.TrackDescriptor{Uuid: proto.Uint64(u), ParentUuid: proto.Uint64(parent),
		Thread: &pb.ThreadDescriptor{Pid: proto.Int32(int32(pid)), Tid: proto.Int64(int64(tid))}})
	return u
}

// counterTrackOf is the counter's track, cached in its slot.
func (p *perfettoWriter) counterTrackOf(c *counterValue) uint64 {
	if c.slot != nil && c.slot[c.kind] != 0 {
		return c.slot[c.kind]
	}
	u := p.counterTrack(c.pid, c.qpn, c.kind)
	if c.slot != nil {
		c.slot[c.kind] = u
	}
	return u
}

func (p *perfettoWriter) counterTrack(pid, qpn uint32, k counterKind) uint64 {
	key := counterKey{qpKey{pid, qpn}, k}
	if p.lastCounterUUID != 0 && p.lastCounter == key {
		return p.lastCounterUUID
	}
	if u, ok := p.counters[key]; ok {
		p.lastCounter, p.lastCounterUUID = key, u
		return u
	}
	parent := p.process(pid)
	u := p.uuid()
	p.counters[key] = u
	unit := pb.CounterDescriptor_UNIT_UNSPECIFIED
	if k == ctrOutstanding {
		unit = pb.CounterDescriptor_UNIT_COUNT
	}
	p.track(&pb.TrackDescriptor{Uuid: proto.Uint64(u), ParentUuid: proto.Uint64(parent),
		StaticOrDynamicName: &pb.TrackDescriptor_Name{Name: "QP " + hex(uint64(qpn)) + " " + counterInfo[k].title},
		Counter:             &pb.CounterDescriptor{Unit: unit.Enum()}})
	return u
}

func (p *perfettoWriter) failureTrack(pid, qpn uint32) uint64 {
	key := qpKey{pid, qpn}
	if u, ok := p.failures[key]; ok {
		return u
	}
	parent := p.process(pid)
	u := p.uuid()
	p.failures[key] = u
	p.track(&pb.TrackDescriptor{Uuid: proto.Uint64(u), ParentUuid: proto.Uint64(parent),
		StaticOrDynamicName: &pb.TrackDescriptor_Name{Name: "QP " + hex(uint64(qpn)) + " failed posts"}})
	return u
}

// setLen writes the length of b[at:] into the byte kept for it at
// b[at-1], making room when it takes more than one.
func setLen(b []byte, at int) []byte {
	n := len(b) - at
	if n < 0x80 {
		b[at-1] = byte(n)
		return b
	}
	l := protowire.AppendVarint(nil, uint64(n))
	b = append(b, l[1:]...)
	copy(b[at+len(l)-1:], b[at:at+n])
	copy(b[at-1:], l)
	return b
}

// event ends the packet startEvent began and writes it, with the strings
// interned by it.
func (p *perfettoWriter) event() {
	b := setLen(p.pkt, p.teStart)
	if len(p.names.fresh)+len(p.cats.fresh)+len(p.annNames.fresh)+len(p.values.fresh) > 0 {
		b = p.appendInterned(b)
	}
	b = setLen(b, p.pktStart)
	p.out, p.pkt = b, nil
	p.flush(outBuffer)
}

func (p *perfettoWriter) appendInterned(b []byte) []byte {
	d := &pb.InternedData{}
	for _, s := range p.names.fresh {
		d.EventNames = append(d.EventNames, &pb.EventName{Iid: proto.Uint64(p.names.iid(s)), Name: proto.String(s)})
	}
	for _, s := range p.cats.fresh {
		d.EventCategories = append(d.EventCategories, &pb.EventCategory{Iid: proto.Uint64(p.cats.iid(s)), Name: proto.String(s)})
	}
	for _, s := range p.annNames.fresh {
		d.DebugAnnotationNames = append(d.DebugAnnotationNames, &pb.DebugAnnotationName{Iid: proto.Uint64(p.annNames.iid(s)), Name: proto.String(s)})
	}
	for _, s := range p.values.fresh {
		d.DebugAnnotationStringValues = append(d.DebugAnnotationStringValues, &pb.InternedString{Iid: proto.Uint64(p.values.iid(s)), Str: []byte(s)})
	}
	p.names.fresh, p.cats.fresh, p.annNames.fresh, p.values.fresh = p.names.fresh[:0], p.cats.fresh[:0], p.annNames.fresh[:0], p.values.fresh[:0]
	m, err := proto.Marshal(d)
	if err != nil {
		p.err = err
	}
	b = protowire.AppendTag(b, fInterned, protowire.BytesType)
	return protowire.AppendBytes(b, m)
}

// startEvent begins a TrackEvent packet at ts: type, track, name and
// category; the event's fields follow in p.pkt, and event() ends it.
func (p *perfettoWriter) startEvent(ts uint64, typ pb.TrackEvent_Type, track uint64, name, cat string) {
	// the packet is written in place, after the ones not yet written out
	b := append(p.out, packetHead...) // its length is set by event()
	p.pktStart = len(b) - len(tTimestamp)
	b = uv(b, ts)
	b = append(b, eventHeads[typ]...) // its length is set by event()
	p.teStart = len(b) - len(tType) - 1 - len(tTrackUUID)
	b = uv(b, track)
	if name != "" {
		b = field(b, tNameIID, p.names.id(name))
	}
	if cat != "" {
		b = field(b, tCategoryIIDs, p.cats.id(cat))
	}
	p.pkt = b
}

func (p *perfettoWriter) annotations(args []arg) {
	for i := range args {
		a := &args[i]
		b := field(p.ann[:0], tAnnNameIID, p.annNames.id(a.key))
		switch a.kind {
		case argUint, argHex, argBool:
			b = field(b, annTags[a.kind], a.u)
		case argInt:
			b = field(b, annTags[argInt], uint64(a.i))
		case argStr:
			if len(a.s) <= maxInternedValue {
				b = field(b, annTags[argStr], p.values.id(a.s))
			} else {
				b = protowire.AppendTag(b, fAnnString, protowire.BytesType)
				b = protowire.AppendString(b, a.s)
			}
		}
		p.ann = b
		p.pkt = uv(append(p.pkt, tAnnotations...), uint64(len(b)))
		p.pkt = append(p.pkt, b...)
	}
}

// extraCounters adds counter values to the event: whole numbers as extra
// counter values of the event.
func (p *perfettoWriter) extraCounters(cs []counterValue) {
	for i := range cs {
		p.pkt = field(p.pkt, tExtraUUIDs, p.counterTrackOf(&cs[i]))
	}
	for _, c := range cs {
		p.pkt = field(p.pkt, tExtraValues, uint64(int64(c.v)))
	}
}

func (p *perfettoWriter) item(it *item) {
	var track uint64
	switch it.kind {
	case itemSlice, itemInstant:
		track = p.thread(it.pid, it.tid)
	case itemProcess:
		track = p.process(it.pid)
	default:
		track = p.global
	}
	// counter tracks are defined before the packet that uses them
	for i := range it.counters {
		p.counterTrackOf(&it.counters[i])
	}
	if it.kind != itemSlice {
		p.startEvent(it.ts, pb.TrackEvent_TYPE_INSTANT, track, it.name, it.cat)
		p.annotations(it.args)
		p.extraCounters(it.counters)
		p.event()
		return
	}
	p.startEvent(it.ts, pb.TrackEvent_TYPE_SLICE_BEGIN, track, it.name, it.cat)
	p.annotations(it.args)
	p.event()
	p.startEvent(it.ts+it.dur, pb.TrackEvent_TYPE_SLICE_END, track, "", "")
	p.extraCounters(it.counters)
	p.event()
}

func (p *perfettoWriter) counter(ts uint64, c counterValue) {
	track := p.counterTrackOf(&c)
	p.startEvent(ts, pb.TrackEvent_TYPE_COUNTER, track, "", "")
	if counterInfo[c.kind].integer {
		p.pkt = field(p.pkt, tCounterValue, uint64(int64(c.v)))
	} else {
		p.pkt = protowire.AppendTag(p.pkt, fDoubleValue, protowire.Fixed64Type)
		p.pkt = protowire.AppendFixed64(p.pkt, math.Float64bits(c.v))
	}
	p.event()
}

// burst draws folded failures on the QP's own track: an instant for one,
// a slice for a run.
func (p *perfettoWriter) burst(b *burst) {
	track := p.failureTrack(b.pid, b.qpn)
	if b.count == 1 && b.first == b.last {
		p.startEvent(b.first, pb.TrackEvent_TYPE_INSTANT, track, b.name(), "error")
		p.annotations(burstArgs(b))
		p.event()
		return
	}
	p.startEvent(b.first, pb.TrackEvent_TYPE_SLICE_BEGIN, track, b.name(), "error")
	p.annotations(burstArgs(b))
	p.event()
	p.startEvent(b.last, pb.TrackEvent_TYPE_SLICE_END, track, "", "")
	p.event()
}

func (p *perfettoWriter) close() error {
	if p.err != nil {
		return p.err
	}
	p.flush(0)
	return p.err
}

// outBuffer is how much output is gathered before it is written.
const outBuffer = 256 << 10

// flush writes the packets gathered once there are more than n bytes.
func (p *perfettoWriter) flush(n int) {
	if len(p.out) <= n {
		return
	}
	if p.err == nil {
		_, p.err = p.w.Write(p.out)
	}
	p.out = p.out[:0]
}
