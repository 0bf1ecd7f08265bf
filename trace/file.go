// Recordings (Writer, Reader) are a versioned binary file: a file header,
// then blocks (version 2) or chunks (version 1) of records, then an end
// block or chunk. A Writer writes version 2; a Reader reads both.
//
//	file header  magic "SQSCOPE\x00", u16 version,
//	             u32 info length, u32 CRC32-C of the info, info (FileInfo)
//
// Version 2 (compact):
//
//	block        u32 payload length (>0), u32 record count (>0),
//	             u32 length of the records (>0), u32 CRC32-C of the
//	             first 12 bytes and the payload, payload: the records
//	             compressed as one zstd frame
//	end block    u32 8, u32 0, u32 0, u32 CRC32-C as a block's, u64
//	             records in the file
//
// The records are version 2's (codec.go, compact.go): each is encoded
// against the records before it in its block, so each block decodes on
// its own. A writer ends a block once its records reach blockTarget bytes,
// or on Flush or Close; so a block holds at most blockTarget plus one
// record, and neither side's memory grows with the recording.
//
// Version 1:
//
//	chunk        u32 payload length (>0), u32 record count (>0),
//	             u32 CRC32-C of the payload, payload (whole records)
//	end chunk    u32 8, u32 0, u32 CRC32-C, u64 records in the file
//
// Records are framed with their kind and length (see codec.go) and are
// self-delimiting, so a version 1 reader does not need the chunk checksum
// to find them.
//
// Integers are little-endian, checksums are CRC32-C (Castagnoli). Unknown
// record kinds in a valid block or chunk are skipped and counted
// (Reader.Skipped).
//
// Truncation. A writer writes each block (chunk), header first, with one
// write call, and the end block on Close. A file cut anywhere (a killed
// writer, a full disk, a partial copy) reads as every event of the whole
// blocks before the cut, then a *TruncatedError saying where the last
// whole block ended, how many bytes were left over and how many records
// the block cut short held, all lost: its records cannot be decompressed.
// Of a version 1 file the whole records of the cut chunk are read too,
// and the error counts them as not verified by a checksum (it covers bytes
// that are missing). Only a file that ends with its end block reads to
// io.EOF; a file cut exactly between two blocks is still reported as
// truncated, with 0 bytes left over. A block that is whole but fails its
// checksum stops the reader with a *CorruptError naming its offset.
package trace

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"
)

const (
	fileMagic = "SQSCOPE\x00"
	// FormatVersion is the recording format this package writes; it reads
	// every version from 1 to this one.
	FormatVersion = 2

	fileHeaderLen  = len(fileMagic) + 2 + 8 // magic, version, info length, info CRC
	chunkHeaderLen = 12                     // version 1
	blockHeaderLen = 16                     // version 2
	endChunkLen    = 8

	blockTarget   = 256 << 10 // a block is written once its records reach this
	maxRecordBody = 4 << 20   // largest event the writer accepts
	maxChunkLen   = 16 << 20  // largest chunk or block payload the reader accepts
	maxRawLen     = 16 << 20  // largest records of a block the reader accepts
	maxInfoLen    = 1 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// FileInfo describes where and how a recording was made. It is stored in the
// file header.
type FileInfo struct {
	Hostname    string
	Kernel      string    // kernel release, as uname -r prints it
	Version     string    // sqscope version that wrote the recording
	StartWall   time.Time // wall clock when recording started
	StartMonoNS uint64    // CLOCK_MONOTONIC ns at the same moment, to map event times to wall time
	Target      string    // what was traced: a command line, or "pid 1234"
	TargetPID   uint32    // 0 when not known
	ProbeMode   string    // how the probes were placed or what they record, e.g. "ops-table"
	// Env holds the target's provider knobs that change what the HCA does
	// (MLX5_POST_SEND_PREFER_BF, MLX5_SHUT_UP_BF) as NAME=VALUE.
	Env []string
	// Flight is set in a recording written by the flight recorder on a
	// trigger: what triggered it and what its window holds.
	Flight *FlightInfo
}

// FlightInfo describes a recording the flight recorder wrote on a
// trigger. Its events start at WindowNS, the oldest event kept in memory
// at the trigger, after a prefix that re-creates the QPs and CQs known
// before then (QPCreate.Window); the occupancy of those QPs at the
// window's start is unknown, as after a late attach.
type FlightInfo struct {
	Trigger   string // what triggered it: "enomem", "signal", "diagnosis=KIND"
	Detail    string // about the trigger, e.g. the QP and pid of a failed post
	TriggerNS uint64 // CLOCK_MONOTONIC ns of the trigger
	WindowNS  uint64 // of the window's first event: the window holds TriggerNS-WindowNS before it
	AfterNS   uint64 // how long after the trigger it was to record
	// Dropped counts events the memory bound (--flight-mib) dropped
	// before their time had passed; none of them is in the file, and
	// the window is that much shorter than asked.
	Dropped uint64
}

// Anchor is the recording's tie of event times to the wall clock: unknown
// (zero) in a file that lacks either of its start times.
func (fi FileInfo) Anchor() WallAnchor {
	if fi.StartWall.IsZero() || fi.StartMonoNS == 0 {
		return WallAnchor{}
	}
	return WallAnchor{Wall: fi.StartWall, MonoNS: fi.StartMonoNS}
}

// HostInfo returns a FileInfo with this host's name and kernel release and
// the current wall time; the caller fills in the rest. Fields it cannot read
// stay empty.
func HostInfo() FileInfo {
	var fi FileInfo
	fi.Hostname, _ = os.Hostname()
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		fi.Kernel = strings.TrimSpace(string(b))
	}
	fi.StartWall = time.Now()
	return fi
}

func appendInfo(b []byte, fi *FileInfo) []byte {
	b = appendStr(b, fi.Hostname)
	b = appendStr(b, fi.Kernel)
	b = appendStr(b, fi.Version)
	if fi.StartWall.IsZero() {
		b = append(b, 0)
	} else {
		b = append(b, 1)
		b = appendZ(b, fi.StartWall.UnixNano())
	}
	b = appendU(b, fi.StartMonoNS)
	b = appendStr(b, fi.Target)
	b = appendU(b, uint64(fi.TargetPID))
	b = appendStr(b, fi.ProbeMode)
	if len(fi.Env) > 0 || fi.Flight != nil { // absent in files without it, which read the same
		b = appendU(b, uint64(len(fi.Env)))
		for _, e := range fi.Env {
			b = appendStr(b, e)
		}
	}
	if f := fi.Flight; f != nil { // appended: older readers ignore it
		b = appendStr(b, f.Trigger)
		b = appendStr(b, f.Detail)
		b = appendU(b, f.TriggerNS)
		b = appendU(b, f.WindowNS)
		b = appendU(b, f.AfterNS)
		b = appendU(b, f.Dropped)
	}
	return b
}

// decodeInfo reads the info block; bytes past the known fields are ignored
// (a later writer of version 1 may append fields).
func decodeInfo(p []byte) (FileInfo, error) {
	r := fieldReader{b: p}
	var fi FileInfo
	fi.Hostname = r.str()
	fi.Kernel = r.str()
	fi.Version = r.str()
	if r.bool() {
		fi.StartWall = time.Unix(0, r.z64())
	}
	fi.StartMonoNS = r.u64()
	fi.Target = r.str()
	fi.TargetPID = r.u32()
	fi.ProbeMode = r.str()
	if r.left() > 0 { // appended after the first release of version 1
		n := r.count()
		for i := 0; i < n && r.err == nil; i++ {
			fi.Env = append(fi.Env, r.str())
		}
	}
	if r.left() > 0 { // a flight recording's
		f := &FlightInfo{Trigger: r.str(), Detail: r.str(), TriggerNS: r.u64(), WindowNS: r.u64(), AfterNS: r.u64(), Dropped: r.u64()}
		fi.Flight = f
	}
	return fi, r.err
}

// Writer writes a recording. Its methods may be called from several
// goroutines, e.g. Flush or Close from a signal handler while another
// goroutine writes.
type Writer struct {
	mu     sync.Mutex
	w      io.Writer
	file   *os.File // set by Create: synced and closed by Close
	enc    *encoder
	raw    []byte // the records of the block being filled
	count  uint32 // records in raw
	target int    // length of the block's records (and varying values) that ends it
	block  []byte // the block's records as they are compressed
	out    []byte // a block as written: header, then the compressed records
	events int64
	bytes  int64
	err    error // first write error; sticks
	closed bool
}

// Create creates (or truncates) the file at path with mode 0600, writes the
// file header and returns a Writer for it.
func Create(path string, info FileInfo) (*Writer, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("creating recording: %w", err)
	}
	// An existing file keeps its mode through O_TRUNC: a recording shows what
	// a process did, so it must not stay readable by others.
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return nil, fmt.Errorf("creating recording: %w", err)
	}
	w, err := NewWriter(f, info)
	if err != nil {
		f.Close()
		return nil, err
	}
	w.file = f
	return w, nil
}

// NewWriter writes the file header to w and returns a Writer that writes
// records to it. Close writes the end of the recording but does not close w.
func NewWriter(w io.Writer, info FileInfo) (*Writer, error) {
	hdr, err := fileHeader(&info, FormatVersion)
	if err != nil {
		return nil, err
	}
	if _, err := zstdEncoder(); err != nil {
		return nil, err
	}
	wr := &Writer{w: w, target: blockTarget, enc: newEncoder(FormatVersion)}
	wr.raw = make([]byte, 0, blockTarget+1024)
	if err := wr.writeOut(hdr); err != nil {
		return nil, err
	}
	return wr, nil
}

// fileHeader is the file header of a recording of the given version.
func fileHeader(info *FileInfo, version uint16) ([]byte, error) {
	info.StartWall = info.StartWall.Round(0) // drop the monotonic reading
	body := appendInfo(nil, info)
	if len(body) > maxInfoLen {
		return nil, fmt.Errorf("recording info too large (%d bytes, limit %d)", len(body), maxInfoLen)
	}
	hdr := make([]byte, 0, fileHeaderLen+len(body))
	hdr = append(hdr, fileMagic...)
	hdr = binary.LittleEndian.AppendUint16(hdr, version)
	hdr = binary.LittleEndian.AppendUint32(hdr, uint32(len(body)))
	hdr = binary.LittleEndian.AppendUint32(hdr, crc32.Checksum(body, castagnoli))
	return append(hdr, body...), nil
}

// The zstd encoder and decoder are shared: both take whole blocks
// (EncodeAll, DecodeAll), which they allow from several goroutines at
// once, each call on one. The encoder's window is twice a block's target:
// a larger one compresses no better and holds more memory.
var (
	zstdEncoder = sync.OnceValues(func() (*zstd.Encoder, error) {
		e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithWindowSize(2*blockTarget),
			zstd.WithEncoderCRC(false),
			zstd.WithLowerEncoderMem(true))
		if err != nil {
			return nil, fmt.Errorf("compressing recording: %w", err)
		}
		return e, nil
	})
	zstdDecoder = sync.OnceValues(func() (*zstd.Decoder, error) {
		d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(maxRawLen))
		if err != nil {
			return nil, fmt.Errorf("decompressing recording: %w", err)
		}
		return d, nil
	})
)

var errClosed = errors.New("recording already closed")

// Write appends ev to the recording. It reaches the underlying writer when
// the current block fills up, or on Flush or Close. An event that cannot be
// encoded is refused with an error and the Writer stays usable; a write error
// of the underlying writer sticks.
func (w *Writer) Write(ev Event) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return errClosed
	}
	if w.err != nil {
		return w.err
	}
	var err error
	if w.raw, err = w.enc.appendRecord(w.raw, ev); err != nil {
		if w.enc.spoilt {
			if ferr := w.flushBlock(); ferr != nil {
				return ferr
			}
		}
		return err
	}
	w.count++
	w.events++
	if len(w.raw)+len(w.enc.c.vals) >= w.target {
		return w.flushBlock()
	}
	return nil
}

// Flush writes the events written so far to the underlying writer (the OS,
// for a file from Create) as a block, if there are any.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return errClosed
	}
	return w.flushBlock()
}

// Close flushes, writes the end of the recording and, for a file from
// Create, syncs and closes it. Closing again returns nil.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	err := w.flushBlock()
	if err == nil {
		end := make([]byte, blockHeaderLen, blockHeaderLen+endChunkLen)
		end = binary.LittleEndian.AppendUint64(end, uint64(w.events))
		putBlockHeader(end, 0, 0)
		err = w.writeOut(end)
	}
	if w.file != nil {
		if err == nil {
			if serr := w.file.Sync(); serr != nil {
				err = fmt.Errorf("syncing recording: %w", serr)
			}
		}
		if cerr := w.file.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("closing recording: %w", cerr)
		}
	}
	return err
}

// Events is the number of events accepted by Write so far.
func (w *Writer) Events() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.events
}

// Bytes is the number of bytes handed to the underlying writer so far (the
// file size, once flushed).
func (w *Writer) Bytes() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.bytes
}

// flushBlock compresses and writes the current block, if it has records,
// and starts the next. w.mu is held.
func (w *Writer) flushBlock() error {
	defer w.enc.reset()
	if w.err != nil {
		return w.err
	}
	if w.count == 0 {
		return nil
	}
	zenc, err := zstdEncoder()
	if err != nil {
		return err
	}
	w.block = w.enc.appendBlock(w.block[:0], w.raw)
	out := append(w.out[:0], make([]byte, blockHeaderLen)...)
	out = zenc.EncodeAll(w.block, out)
	putBlockHeader(out, w.count, len(w.block))
	err = w.writeOut(out)
	w.out, w.raw, w.count = out[:0], w.raw[:0], 0
	return err
}

// putBlockHeader fills the first blockHeaderLen bytes of b from the
// payload that follows them, the block's count of records and their
// length.
func putBlockHeader(b []byte, count uint32, rawLen int) {
	binary.LittleEndian.PutUint32(b[0:], uint32(len(b)-blockHeaderLen))
	binary.LittleEndian.PutUint32(b[4:], count)
	binary.LittleEndian.PutUint32(b[8:], uint32(rawLen))
	binary.LittleEndian.PutUint32(b[12:], blockSum(b[:12], b[blockHeaderLen:]))
}

// blockSum is the checksum of a block: its header's first 12 bytes and its
// payload.
func blockSum(hdr, payload []byte) uint32 {
	return crc32.Update(crc32.Checksum(hdr, castagnoli), castagnoli, payload)
}

func (w *Writer) writeOut(p []byte) error {
	n, err := w.w.Write(p)
	w.bytes += int64(n)
	if err == nil && n < len(p) {
		err = io.ErrShortWrite
	}
	if err != nil {
		w.err = fmt.Errorf("writing recording: %w", err)
	}
	return w.err
}
