// Recordings (Writer, Reader) are a versioned binary file: a file header,
// then chunks of records, then an end chunk.
//
//	file header  magic "SQSCOPE\x00", u16 version (1),
//	             u32 info length, u32 CRC32-C of the info, info (FileInfo)
//	chunk        u32 payload length (>0), u32 record count (>0),
//	             u32 CRC32-C of the payload, payload (whole records)
//	end chunk    u32 8, u32 0, u32 CRC32-C, u64 records in the file
//
// Integers are little-endian, checksums are CRC32-C (Castagnoli). Records are
// framed with their kind and length (see codec.go) and are self-delimiting, so
// a reader does not need the chunk checksum to find them. Unknown record kinds
// in a valid chunk are skipped and counted (Reader.Skipped).
//
// Truncation. A writer writes each chunk, header first, with one write call
// when it reaches about 64 KiB or on Flush, and the end chunk on Close. A
// file cut anywhere (a killed writer, a full disk, a partial copy) reads as
// every event of the whole chunks before the cut, then the whole records of
// the cut chunk, then a *TruncatedError saying where the last whole record
// ended, how many bytes were left over and how many of the returned records
// were not verified by a checksum (those of the cut chunk, whose checksum
// covers bytes that are missing). Only a file that ends with its end chunk
// reads to io.EOF; a file cut exactly between two chunks is still reported as
// truncated, with 0 bytes left over. A chunk that is whole but fails its
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
)

const (
	fileMagic = "SQSCOPE\x00"
	// FormatVersion is the recording format this package writes and reads.
	FormatVersion = 1

	fileHeaderLen  = len(fileMagic) + 2 + 8 // magic, version, info length, info CRC
	chunkHeaderLen = 12
	endChunkLen    = 8

	chunkTarget   = 64 << 10 // a chunk is written once its payload reaches this
	maxRecordBody = 4 << 20  // largest event the writer accepts
	maxChunkLen   = 16 << 20 // largest chunk payload the reader accepts
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
	if len(fi.Env) > 0 { // absent in files without it, which read the same
		b = appendU(b, uint64(len(fi.Env)))
		for _, e := range fi.Env {
			b = appendStr(b, e)
		}
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
	if len(r.b) > 0 { // appended after the first release of version 1
		n := r.count()
		for i := 0; i < n && r.err == nil; i++ {
			fi.Env = append(fi.Env, r.str())
		}
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
	enc    encoder
	chunk  []byte // chunk header space, then the payload being filled
	count  uint32 // records in chunk
	target int    // payload size that triggers a chunk write
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
	info.StartWall = info.StartWall.Round(0) // drop the monotonic reading
	body := appendInfo(nil, &info)
	if len(body) > maxInfoLen {
		return nil, fmt.Errorf("recording info too large (%d bytes, limit %d)", len(body), maxInfoLen)
	}
	hdr := make([]byte, 0, fileHeaderLen+len(body))
	hdr = append(hdr, fileMagic...)
	hdr = binary.LittleEndian.AppendUint16(hdr, FormatVersion)
	hdr = binary.LittleEndian.AppendUint32(hdr, uint32(len(body)))
	hdr = binary.LittleEndian.AppendUint32(hdr, crc32.Checksum(body, castagnoli))
	hdr = append(hdr, body...)
	wr := &Writer{w: w, target: chunkTarget}
	wr.chunk = make([]byte, chunkHeaderLen, chunkHeaderLen+chunkTarget+1024)
	if err := wr.writeOut(hdr); err != nil {
		return nil, err
	}
	return wr, nil
}

var errClosed = errors.New("recording already closed")

// Write appends ev to the recording. It reaches the underlying writer when
// the current chunk fills up, or on Flush or Close. An event that cannot be
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
	if w.chunk, err = w.enc.appendRecord(w.chunk, ev); err != nil {
		return err
	}
	w.count++
	w.events++
	if len(w.chunk)-chunkHeaderLen >= w.target {
		return w.flushChunk()
	}
	return nil
}

// Flush writes the events written so far to the underlying writer (the OS,
// for a file from Create) as a chunk, if there are any.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return errClosed
	}
	return w.flushChunk()
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
	err := w.flushChunk()
	if err == nil {
		end := make([]byte, chunkHeaderLen+endChunkLen)
		binary.LittleEndian.PutUint64(end[chunkHeaderLen:], uint64(w.events))
		putChunkHeader(end, 0)
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

// flushChunk writes the current chunk, if it has records. w.mu is held.
func (w *Writer) flushChunk() error {
	if w.err != nil {
		return w.err
	}
	if w.count == 0 {
		return nil
	}
	putChunkHeader(w.chunk, w.count)
	err := w.writeOut(w.chunk)
	w.chunk = w.chunk[:chunkHeaderLen]
	w.count = 0
	w.enc.reset()
	return err
}

// putChunkHeader fills the first chunkHeaderLen bytes of c from the payload
// that follows them.
func putChunkHeader(c []byte, count uint32) {
	payload := c[chunkHeaderLen:]
	binary.LittleEndian.PutUint32(c[0:], uint32(len(payload)))
	binary.LittleEndian.PutUint32(c[4:], count)
	binary.LittleEndian.PutUint32(c[8:], crc32.Checksum(payload, castagnoli))
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
