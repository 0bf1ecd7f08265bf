package trace

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"slices"
	"strings"
)

// ErrBadMagic is returned for a file that is not a recording.
var ErrBadMagic = errors.New("not an sqscope recording (bad magic)")

// VersionError is returned for a recording of a format version this package
// does not read.
type VersionError struct {
	Version uint16
}

func (e *VersionError) Error() string {
	return fmt.Sprintf("unsupported recording version %d (this sqscope reads versions 1 to %d)", e.Version, FormatVersion)
}

// TruncatedError says the recording ends before its end block: the writer
// was killed, the disk filled up, or the copy is partial. Every record
// before the cut that can be read has been returned.
type TruncatedError struct {
	// Offset is the byte offset where the last whole record ends, which in
	// version 2 is where the last whole block ends (where the file header
	// ends if there is none; 0 when the cut is inside the file header).
	Offset int64
	// Leftover counts the bytes past Offset that do not make a whole record
	// (version 2: a whole block).
	Leftover int64
	// Unverified counts the events returned from the cut chunk of a
	// version 1 file, whose checksum could not be checked.
	Unverified int
	// CutRecords counts the records of the version 2 block the cut fell in,
	// as its header says: lost, since a block cut short cannot be
	// decompressed. 0 when the cut leaves no whole block header.
	CutRecords int64
	// InHeader says the file header itself is cut: there is no event.
	InHeader bool
}

func (e *TruncatedError) Error() string {
	if e.InHeader {
		return fmt.Sprintf("recording truncated inside its file header, after %d bytes", e.Leftover)
	}
	s := fmt.Sprintf("recording truncated: last whole record ends at byte %d, %d bytes left over", e.Offset, e.Leftover)
	if e.Unverified > 0 {
		s += fmt.Sprintf("; the last %d events were not verified by a checksum", e.Unverified)
	}
	if e.CutRecords > 0 {
		s += fmt.Sprintf("; the block cut short held %d records, lost", e.CutRecords)
	}
	return s
}

func (e *TruncatedError) Unwrap() error { return io.ErrUnexpectedEOF }

// CorruptError says the recording is damaged at Offset (a chunk whose
// checksum fails, or a malformed chunk or record). The events before it have
// been returned; the reader does not go on.
type CorruptError struct {
	Offset int64
	Reason string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("corrupt recording at byte %d: %s", e.Offset, e.Reason)
}

// Reader reads a recording event by event.
type Reader struct {
	br      *bufio.Reader
	closer  io.Closer
	info    FileInfo
	version uint16
	off     int64 // bytes consumed so far
	lastEnd int64 // offset where the last whole record ends
	dec     *decoder
	buf     []byte
	// Version 1: the events of a chunk, decoded at once.
	pending []Event
	next    int // index of the next pending event
	// Version 2: the block being read, decoded record by record.
	block     []byte // as it decompressed
	raw       []byte // its records
	pos       int    // where the next record starts in raw
	left      uint32 // its records not read yet
	blockAt   int64  // where it starts in the file
	blockRecs uint32 // its records
	zbuf      []byte // its payload as read

	err     error // returned once the events before it are out; sticks
	records int64 // records read, including skipped ones
	skipped int64
}

// Open opens the recording at path and reads its header.
func Open(path string) (*Reader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("opening recording: %w", err)
	}
	r, err := NewReader(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	r.closer = f
	return r, nil
}

// NewReader reads the file header from r and returns a Reader for the
// events that follow.
func NewReader(r io.Reader) (*Reader, error) {
	rd := &Reader{br: bufio.NewReaderSize(r, 64<<10)}
	if err := rd.readHeader(); err != nil {
		return nil, err
	}
	return rd, nil
}

// Info returns what the file header says about the recording.
func (rd *Reader) Info() FileInfo { return rd.info }

// Version is the recording's format version.
func (rd *Reader) Version() uint16 { return rd.version }

// Skipped counts records of kinds this version does not know, skipped so far.
func (rd *Reader) Skipped() int64 { return rd.skipped }

// Reuse makes the reader decode posts and polls, and their lists, into
// the memory of those it returned before: the events a call of Next or
// NextBatch returns are overwritten by the next call. It is for a
// consumer that keeps nothing of an event once it has handled it (an
// analyzer), which then reads a recording without an allocation per
// event. The other kinds are new events still, and so is every event of
// a version 1 recording, whose chunks are decoded whole.
func (rd *Reader) Reuse() {
	rd.dec.reuse = rd.version >= 2
}

// NextBatch reads up to len(evs) events into evs, as many calls of Next
// would, and returns how many: at least one and a nil error, or none and
// the error Next would return.
func (rd *Reader) NextBatch(evs []Event) (int, error) {
	rd.dec.rewind()
	for i := range evs {
		if rd.left > 1 && rd.pos < len(rd.raw) { // blockRecord's usual case, in line
			if ev, size := rd.dec.fastRecord(rd.raw[rd.pos:]); ev != nil {
				rd.pos += size
				rd.left--
				rd.records++
				evs[i] = ev
				continue
			}
			ev, size, err := rd.dec.nextRecord(rd.raw[rd.pos:])
			if ev, err = rd.decoded(ev, size, err); err != nil {
				rd.left, rd.err = 0, err // as nextEvent does, which returns it
			} else if ev != nil {
				evs[i] = ev
				continue
			}
		}
		ev, err := rd.nextEvent()
		if err != nil {
			if i > 0 {
				return i, nil // the error sticks: the next call returns it
			}
			return 0, err
		}
		evs[i] = ev
	}
	return len(evs), nil
}

// Close closes the file opened by Open; for a Reader from NewReader it does
// nothing.
func (rd *Reader) Close() error {
	if rd.closer == nil {
		return nil
	}
	c := rd.closer
	rd.closer = nil
	return c.Close()
}

// Next returns the next event. It returns io.EOF at the end of a complete
// recording, a *TruncatedError after the last readable record of a cut one
// and a *CorruptError where a damaged block starts. Once it returns an
// error it returns the same error again.
func (rd *Reader) Next() (Event, error) {
	rd.dec.rewind()
	return rd.nextEvent()
}

func (rd *Reader) nextEvent() (Event, error) {
	for {
		if rd.next < len(rd.pending) {
			ev := rd.pending[rd.next]
			rd.pending[rd.next] = nil
			rd.next++
			return ev, nil
		}
		if rd.left > 0 {
			ev, err := rd.blockRecord()
			if err != nil {
				rd.left, rd.err = 0, err
				return nil, err
			}
			if ev != nil {
				return ev, nil
			}
			continue
		}
		if rd.err != nil {
			return nil, rd.err
		}
		if rd.version >= 2 {
			rd.err = rd.readBlock()
			continue
		}
		rd.pending, rd.next = rd.pending[:0], 0
		rd.err = rd.readChunk()
	}
}

// read reads n bytes into buf (reused), growing it as data arrives so that a
// damaged length costs no memory it does not hold. It returns what it read;
// err is io.EOF or io.ErrUnexpectedEOF when the input ends first.
func (rd *Reader) read(buf []byte, n int) ([]byte, error) {
	buf = buf[:0]
	for len(buf) < n {
		want := min(n-len(buf), 64<<10)
		buf = slices.Grow(buf, want)
		m, err := io.ReadFull(rd.br, buf[len(buf):len(buf)+want])
		buf = buf[:len(buf)+m]
		rd.off += int64(m)
		if err != nil {
			if err == io.EOF && len(buf) > 0 {
				err = io.ErrUnexpectedEOF
			}
			return buf, err
		}
	}
	return buf, nil
}

func isEOF(err error) bool { return err == io.EOF || err == io.ErrUnexpectedEOF }

func (rd *Reader) ioError(err error) error {
	return fmt.Errorf("reading recording at byte %d: %w", rd.off, err)
}

func (rd *Reader) headerCut() error {
	return &TruncatedError{Leftover: rd.off, InHeader: true}
}

func (rd *Reader) readHeader() error {
	// Magic and version first, so that a recording of another version is
	// reported as such even when it is cut short.
	p, err := rd.read(rd.buf, len(fileMagic)+2)
	rd.buf = p
	magicLen := min(len(p), len(fileMagic))
	if string(p[:magicLen]) != fileMagic[:magicLen] {
		return ErrBadMagic
	}
	if err == nil {
		v := binary.LittleEndian.Uint16(p[len(fileMagic):])
		if v < 1 || v > FormatVersion {
			return &VersionError{Version: v}
		}
		rd.version, rd.dec = v, newDecoder(v)
		p, err = rd.read(rd.buf, 8)
		rd.buf = p
	}
	if err != nil {
		if isEOF(err) {
			return rd.headerCut()
		}
		return rd.ioError(err)
	}
	infoLen := binary.LittleEndian.Uint32(p[0:])
	sum := binary.LittleEndian.Uint32(p[4:])
	if infoLen > maxInfoLen {
		return &CorruptError{Offset: 10, Reason: fmt.Sprintf("file header too large (%d bytes)", infoLen)}
	}
	body, err := rd.read(rd.buf, int(infoLen))
	rd.buf = body
	if err != nil {
		if isEOF(err) {
			return rd.headerCut()
		}
		return rd.ioError(err)
	}
	if crc32.Checksum(body, castagnoli) != sum {
		return &CorruptError{Offset: int64(fileHeaderLen), Reason: "file header checksum mismatch"}
	}
	if rd.info, err = decodeInfo(body); err != nil {
		return &CorruptError{Offset: int64(fileHeaderLen), Reason: "file header: " + err.Error()}
	}
	rd.lastEnd = rd.off
	return nil
}

// truncated is the error for input that ends after lastEnd.
func (rd *Reader) truncated(unverified int) *TruncatedError {
	return &TruncatedError{Offset: rd.lastEnd, Leftover: rd.off - rd.lastEnd, Unverified: unverified}
}

// frameHeader reads the n bytes of the header of a block (chunk) or the
// end; where the input ends first, the error says where it was cut.
func (rd *Reader) frameHeader(n int) ([]byte, error) {
	hdr, err := rd.read(rd.buf, n)
	rd.buf = hdr
	if err != nil {
		if isEOF(err) {
			return nil, rd.truncated(0)
		}
		return nil, rd.ioError(err)
	}
	return hdr, nil
}

// readBlock reads the next block of a version 2 file (or its end) and
// makes its records the next to decode. The error it returns is for Next
// to give out after the events before it.
func (rd *Reader) readBlock() error {
	start := rd.off
	hdr, err := rd.frameHeader(blockHeaderLen)
	if err != nil {
		return err
	}
	length := binary.LittleEndian.Uint32(hdr[0:])
	count := binary.LittleEndian.Uint32(hdr[4:])
	rawLen := binary.LittleEndian.Uint32(hdr[8:])
	sum := binary.LittleEndian.Uint32(hdr[12:])
	hdrSum := crc32.Checksum(hdr[:12], castagnoli)
	if count == 0 {
		if rawLen != 0 {
			return &CorruptError{Offset: start, Reason: fmt.Sprintf("bad block header (%d bytes of records, no records)", rawLen)}
		}
		return rd.readEnd(start, length, sum, hdrSum)
	}
	switch {
	case length == 0 || length > maxChunkLen:
		return &CorruptError{Offset: start, Reason: fmt.Sprintf("bad block length %d", length)}
	case rawLen == 0 || rawLen > maxRawLen:
		return &CorruptError{Offset: start, Reason: fmt.Sprintf("bad length of a block's records %d", rawLen)}
	case count > rawLen:
		return &CorruptError{Offset: start, Reason: fmt.Sprintf("%d bytes of records cannot hold %d records", rawLen, count)}
	}
	payload, err := rd.read(rd.zbuf, int(length))
	rd.zbuf = payload
	if err != nil {
		if isEOF(err) {
			te := rd.truncated(0)
			te.CutRecords = int64(count)
			return te
		}
		return rd.ioError(err)
	}
	if crc32.Update(hdrSum, castagnoli, payload) != sum {
		return &CorruptError{Offset: start, Reason: "block checksum mismatch"}
	}
	zdec, err := zstdDecoder()
	if err != nil {
		return err
	}
	raw, err := zdec.DecodeAll(payload, rd.block[:0])
	if err != nil {
		return &CorruptError{Offset: start, Reason: "block does not decompress: " + oneLine(err.Error())}
	}
	if len(raw) != int(rawLen) {
		return &CorruptError{Offset: start, Reason: fmt.Sprintf("block decompresses to %d bytes of records, its header says %d", len(raw), rawLen)}
	}
	records, err := rd.dec.beginBlock(raw)
	if err != nil {
		return &CorruptError{Offset: start, Reason: err.Error()}
	}
	rd.block, rd.raw, rd.pos, rd.left, rd.blockAt, rd.blockRecs = raw, records, 0, count, start, count
	rd.lastEnd = rd.off
	return nil
}

// blockRecord decodes the next record of the block being read: its event,
// nil for a kind this version does not know.
func (rd *Reader) blockRecord() (Event, error) {
	if rd.pos >= len(rd.raw) {
		return nil, &CorruptError{Offset: rd.blockAt, Reason: fmt.Sprintf("block holds fewer records than its header says (%d)", rd.blockRecs)}
	}
	return rd.decoded(rd.dec.nextRecord(rd.raw[rd.pos:]))
}

// decoded moves past the record of the block being read that was decoded
// to ev, size bytes long, or fails where it failed (err): blockRecord's
// result.
func (rd *Reader) decoded(ev Event, size int, err error) (Event, error) {
	if err != nil {
		return nil, &CorruptError{Offset: rd.blockAt, Reason: fmt.Sprintf("record %d of the block: %v", rd.blockRecs-rd.left, err)}
	}
	rd.pos += size
	rd.left--
	rd.records++
	if rd.left == 0 {
		if rd.pos != len(rd.raw) {
			rd.err = &CorruptError{Offset: rd.blockAt, Reason: "stray bytes after the last record of the block"}
		} else if err := rd.dec.endBlock(); err != nil {
			rd.err = &CorruptError{Offset: rd.blockAt, Reason: err.Error()}
		}
	}
	if ev == nil {
		rd.skipped++
	}
	return ev, nil
}

// unit is what the file's records come in: chunks (version 1) or blocks.
func (rd *Reader) unit() string {
	if rd.version >= 2 {
		return "block"
	}
	return "chunk"
}

// oneLine keeps the first line of a message.
func oneLine(s string) string {
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		return s[:i]
	}
	return s
}

// readChunk reads the next chunk and queues its events. The error it returns
// is for Next to give out after them.
func (rd *Reader) readChunk() error {
	start := rd.off
	hdr, err := rd.frameHeader(chunkHeaderLen)
	if err != nil {
		return err
	}
	length := binary.LittleEndian.Uint32(hdr[0:])
	count := binary.LittleEndian.Uint32(hdr[4:])
	sum := binary.LittleEndian.Uint32(hdr[8:])
	if count == 0 {
		return rd.readEnd(start, length, sum, 0)
	}
	if length == 0 || length > maxChunkLen {
		return &CorruptError{Offset: start, Reason: fmt.Sprintf("bad chunk length %d", length)}
	}
	if count > length {
		return &CorruptError{Offset: start, Reason: fmt.Sprintf("chunk of %d bytes cannot hold %d records", length, count)}
	}
	payload, err := rd.read(rd.buf, int(length))
	rd.buf = payload
	base := start + chunkHeaderLen
	if err != nil {
		if !isEOF(err) {
			return rd.ioError(err)
		}
		// The writer was cut while writing this chunk: its records are
		// self-delimiting, so the whole ones are still worth returning.
		queued, _, _ := rd.decodeRecords(base, payload, count)
		return rd.truncated(queued)
	}
	if crc32.Checksum(payload, castagnoli) != sum {
		return &CorruptError{Offset: start, Reason: "chunk checksum mismatch"}
	}
	_, n, err := rd.decodeRecords(base, payload, count)
	if err != nil {
		return err
	}
	if rd.lastEnd != rd.off {
		return &CorruptError{Offset: rd.lastEnd, Reason: "stray bytes after the last record of the chunk"}
	}
	if n < int(count) {
		return &CorruptError{Offset: start, Reason: fmt.Sprintf("chunk holds fewer records than its header says (%d)", count)}
	}
	return nil
}

// decodeRecords queues the events of up to count whole records of payload,
// which starts at byte offset base, and returns how many events it queued
// and how many records it read. It stops at the first record that is cut
// short or malformed and returns that as a *CorruptError.
func (rd *Reader) decodeRecords(base int64, payload []byte, count uint32) (queued, n int, err error) {
	rd.dec.reset()
	pos := 0
	for ; n < int(count) && pos < len(payload); n++ {
		ev, size, err := rd.dec.nextRecord(payload[pos:])
		if err != nil {
			return queued, n, &CorruptError{Offset: base + int64(pos), Reason: err.Error()}
		}
		pos += size
		rd.lastEnd = base + int64(pos)
		rd.records++
		if ev == nil {
			rd.skipped++
			continue
		}
		rd.pending = append(rd.pending, ev)
		queued++
	}
	return queued, n, nil
}

// readEnd checks the end chunk (or block), whose header has been read, and
// that nothing follows it. seed is what its checksum starts from: the
// checksum of a block header's first 12 bytes, 0 for a chunk.
func (rd *Reader) readEnd(start int64, length, sum, seed uint32) error {
	if length != endChunkLen {
		return &CorruptError{Offset: start, Reason: fmt.Sprintf("bad %s header (length %d, no records)", rd.unit(), length)}
	}
	p, err := rd.read(rd.buf, endChunkLen)
	rd.buf = p
	if err != nil {
		if isEOF(err) {
			return rd.truncated(0)
		}
		return rd.ioError(err)
	}
	if crc32.Update(seed, castagnoli, p) != sum {
		return &CorruptError{Offset: start, Reason: "end " + rd.unit() + " checksum mismatch"}
	}
	if total := binary.LittleEndian.Uint64(p); total != uint64(rd.records) {
		return &CorruptError{Offset: start, Reason: fmt.Sprintf("recording ends saying it holds %d records, but %d were read", total, rd.records)}
	}
	if _, err := rd.br.ReadByte(); err != io.EOF {
		if err != nil {
			return rd.ioError(err)
		}
		return &CorruptError{Offset: rd.off, Reason: "data after the end of the recording"}
	}
	return io.EOF
}

// Offset is how many bytes of the file have been read so far (for
// progress).
func (rd *Reader) Offset() int64 { return rd.off }
