package trace

// Record encoding (format versions 1 and 2). All integers are
// little-endian; "u" is an unsigned LEB128 varint, "z" a zigzag signed
// varint (encoding/binary Uvarint and Varint), "b" one byte, "s" a string
// as u length then bytes, "?" a bool as one byte 0 or 1.
//
//	record  = kind b, length u, body (length bytes)
//	body    = common header, then the kind's fields below
//
// Every record, of any kind (also kinds this version does not know), starts
// with the common header, so a reader that skips an unknown kind still tracks
// the time and thread state the records after it are encoded against. A
// reader ignores body bytes past the fields it knows: a later writer of the
// same version may append fields.
//
//	header v1 = flags b   bit0: PID as the previous record, bit1: TID as the
//	                      previous record; other bits must be 0
//	            time z    TimeNS minus the previous record's TimeNS (mod 2^64)
//	            pid u     unless bit0
//	            tid u     unless bit1
//	header v2 = thread    a reference to the block's threads (compact.go),
//	                      a new one followed by pid u, tid u
//	            (time z   as version 1's, in the block's column of varying
//	                      values)
//
// "Previous" means within the same chunk or block; each starts from time 0
// and PID/TID 0 (version 2: no thread), so every one decodes on its own.
//
// The fields of each kind follow the header in the order schema.go's
// recordCodec.fields walks them, which is the one description of them, of
// both versions: the encoder and the decoder both follow it, and the
// walk's primitives store a field as its version does. Beyond the letters
// above:
//
//   - EntryNS fields are stored as z TimeNS-EntryNS (mod 2^64), a few bytes
//     for the call's duration, and as 0 when the entry time was not recorded
//     (EntryNS 0).
//   - A list (a post's WRs, a poll's WCs) is, in version 1, u its length,
//     then its elements. An element is stored against the one before it in
//     the same list (the first against zero values): a mask byte says which
//     fields are written, bit 0 for the first field walked and so on, and
//     the others repeat the previous element; the ID, when written, is z
//     ID-(prev ID+1). A run of WRs with consecutive wr_ids and the same
//     opcode, flags and sizes costs one byte per WR. Version 2 refers to
//     the list's shape instead (compact.go).
//   - Version 2 only: a record's QP or CQ is a reference to its block's
//     (compact.go); a post's API, Aborted, Truncated and Ret follow a mask
//     byte, as a list element's fields, stored when not 0; the values that
//     change from record to record (times, call durations, where a list's
//     wr_ids start, a poll's empty polls) are in the block's column of
//     varying values (recordCodec.varying), not in the record.
//   - Fields added after the first release of version 1 come in appended
//     groups (recordCodec.appended): a record stores its groups up to the
//     last one that is set, so a record without the new fields is stored
//     exactly as before, an old reader stops before them, and a new reader
//     reads an old record with them zero.

import (
	"encoding/binary"
	"errors"
	"fmt"
)

const (
	hdrSamePID = 1 << 0
	hdrSameTID = 1 << 1
)

// codecState is what a record is encoded against: the previous record of
// the same chunk or block.
type codecState struct {
	timeNS   uint64
	pid, tid uint32
}

// encoder turns events into records of one version's layout. Its state
// resets at each chunk or block.
type encoder struct {
	state codecState
	c     recordCodec // its out is scratch for the body, so its length can precede it
	// spoilt: a record was refused after its walk had changed the block's
	// tables (version 2), which the block's reader would not follow: the
	// block must end before the next record.
	spoilt bool
}

// newEncoder returns an encoder of the given layout version (1 or 2).
func newEncoder(version uint16) *encoder {
	e := &encoder{}
	e.c.setVersion(version)
	return e
}

func (e *encoder) reset() {
	e.state, e.spoilt = codecState{}, false
	e.c.vals = e.c.vals[:0]
	if e.c.blk != nil {
		e.c.blk.reset()
	}
}

// appendBlock appends to dst a version 2 block's records as they are
// compressed: u the length of the block's column of varying values, the
// column, then the records.
func (e *encoder) appendBlock(dst, records []byte) []byte {
	dst = appendU(dst, uint64(len(e.c.vals)))
	dst = append(dst, e.c.vals...)
	return append(dst, records...)
}

// appendRecord appends ev as one record to dst. On error dst is returned
// unchanged and the state is not advanced (but see spoilt).
func (e *encoder) appendRecord(dst []byte, ev Event) ([]byte, error) {
	h, err := eventHeader(ev)
	if err != nil {
		return dst, err
	}
	e.c.beginEncode(e.c.out[:0])
	vals := len(e.c.vals)
	e.c.header(h, &e.state)
	e.c.fields(ev)
	b := e.c.out
	if len(b) > maxRecordBody {
		e.c.vals = e.c.vals[:vals]
		e.spoilt = e.c.blk != nil
		return dst, fmt.Errorf("%s event too large to record (%d bytes, limit %d)", ev.Kind(), len(b), maxRecordBody)
	}
	e.state = codecState{timeNS: h.TimeNS, pid: h.PID, tid: h.TID}
	dst = append(dst, byte(ev.Kind()))
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...), nil
}

// eventHeader returns the header of one of the concrete event types, or an
// error for nil, a nil pointer or a type this format does not know.
func eventHeader(ev Event) (*Header, error) {
	var h *Header
	switch e := ev.(type) {
	case *QPCreate:
		if e != nil {
			h = &e.Header
		}
	case *QPDestroy:
		if e != nil {
			h = &e.Header
		}
	case *QPModify:
		if e != nil {
			h = &e.Header
		}
	case *Post:
		if e != nil {
			h = &e.Header
		}
	case *Poll:
		if e != nil {
			h = &e.Header
		}
	case *EmptyPolls:
		if e != nil {
			h = &e.Header
		}
	case *PostRecv:
		if e != nil {
			h = &e.Header
		}
	case *Lost:
		if e != nil {
			h = &e.Header
		}
	case *Exit:
		if e != nil {
			h = &e.Header
		}
	case *Attach:
		if e != nil {
			h = &e.Header
		}
	case *QPCounters:
		if e != nil {
			h = &e.Header
		}
	case *CQCounters:
		if e != nil {
			h = &e.Header
		}
	case *CQCreate:
		if e != nil {
			h = &e.Header
		}
	case *SRQCreate:
		if e != nil {
			h = &e.Header
		}
	case *SRQDestroy:
		if e != nil {
			h = &e.Header
		}
	case *End:
		if e != nil {
			h = &e.Header
		}
	case *CQChange:
		if e != nil {
			h = &e.Header
		}
	case *Scan:
		if e != nil {
			h = &e.Header
		}
	case *Proc:
		if e != nil {
			h = &e.Header
		}
	case *PostFail:
		if e != nil {
			h = &e.Header
		}
	case *Window:
		if e != nil {
			h = &e.Header
		}
	case *SQSample:
		if e != nil {
			h = &e.Header
		}
	default:
		if ev == nil {
			return nil, errors.New("cannot record a nil event")
		}
		return nil, fmt.Errorf("cannot record event of type %T", ev)
	}
	if h == nil {
		return nil, fmt.Errorf("cannot record a nil %T", ev)
	}
	return h, nil
}

func appendU(b []byte, v uint64) []byte { return binary.AppendUvarint(b, v) }
func appendZ(b []byte, v int64) []byte  { return binary.AppendVarint(b, v) }

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

func appendStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// entryDelta is how EntryNS is stored: the call's duration, modulo 2^64 so
// any pair of values round-trips, or 0 when no entry time was recorded
// (EntryNS 0). A call whose entry time equals its return time, which a
// probe cannot record, reads back as not recorded.
func entryDelta(timeNS, entryNS uint64) int64 {
	if entryNS == 0 {
		return 0
	}
	return int64(timeNS - entryNS)
}

// entryTime undoes entryDelta.
func entryTime(timeNS uint64, delta int64) uint64 {
	if delta == 0 {
		return 0
	}
	return timeNS - uint64(delta)
}
