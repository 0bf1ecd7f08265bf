package trace

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
)

// Ring keeps the latest events of a trace in memory as encoded blocks, as
// a Writer writes them to a file, for the flight recorder: a block is kept
// while its newest event is younger than the ring's span, and the oldest
// blocks go first when the blocks' bytes would pass the ring's bound,
// counted as dropped. Its memory is the bound plus one block being filled.
type Ring struct {
	mu      sync.Mutex
	w       *Writer
	spanNS  uint64
	max     int64
	blocks  []RingBlock
	bytes   int64
	dropped uint64 // events dropped by the bound before their time
	aged    uint64 // events that aged out of the span
	// the events of the block being filled
	firstNS, lastNS uint64
	seq             uint64 // of the block being filled: blocks written so far
	header          bool   // the Writer's file header was swallowed
}

// RingBlock is one encoded block (as a Writer writes it) and the times
// of its events.
type RingBlock struct {
	Data            []byte
	Records         uint32
	FirstNS, LastNS uint64
	Seq             uint64 // the block's place in the ring's sequence, from 0
}

// NewRing keeps the blocks of the last spanNS nanoseconds of events, at
// most maxBytes of them.
func NewRing(spanNS uint64, maxBytes int64) (*Ring, error) {
	if maxBytes < blockHeaderLen {
		return nil, fmt.Errorf("flight memory bound %d bytes is too small", maxBytes)
	}
	r := &Ring{spanNS: spanNS, max: maxBytes}
	w, err := NewWriter(ringSink{r}, FileInfo{})
	if err != nil {
		return nil, err
	}
	r.w = w
	return r, nil
}

// ringSink receives the Writer's output: its file header first, then one
// block per write.
type ringSink struct{ r *Ring }

func (s ringSink) Write(p []byte) (int, error) {
	r := s.r
	if !r.header {
		r.header = true
		return len(p), nil
	}
	if len(p) < blockHeaderLen {
		return 0, errors.New("flight ring: short block")
	}
	b := RingBlock{Data: append([]byte(nil), p...), Records: binary.LittleEndian.Uint32(p[4:]), FirstNS: r.firstNS, LastNS: r.lastNS, Seq: r.seq}
	r.firstNS, r.lastNS = 0, 0
	r.seq++
	r.blocks = append(r.blocks, b)
	r.bytes += int64(len(b.Data))
	r.trim()
	return len(p), nil
}

// trim drops the blocks past the span, then the oldest past the bound.
// r.mu is held.
func (r *Ring) trim() {
	newest := r.blocks[len(r.blocks)-1].LastNS
	n := 0
	for ; n < len(r.blocks)-1; n++ {
		b := &r.blocks[n]
		switch {
		case b.LastNS+r.spanNS < newest:
			r.aged += uint64(b.Records)
		case r.bytes > r.max:
			r.dropped += uint64(b.Records)
		default:
			r.blocks = r.drop(n)
			return
		}
		r.bytes -= int64(len(b.Data))
	}
	if r.bytes > r.max { // one block above the bound: none kept
		r.dropped += uint64(r.blocks[n].Records)
		r.bytes = 0
		n++
	}
	r.blocks = r.drop(n)
}

// drop removes the first n blocks, letting their memory go.
func (r *Ring) drop(n int) []RingBlock {
	if n == 0 {
		return r.blocks
	}
	clear(r.blocks[:n])
	return append(r.blocks[:0], r.blocks[n:]...)
}

// Write adds ev to the block being filled and returns that block's Seq.
func (r *Ring) Write(ev Event) (uint64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := ev.Hdr().TimeNS
	if r.firstNS == 0 || t < r.firstNS {
		r.firstNS = t
	}
	r.lastNS = max(r.lastNS, t)
	return r.seq, r.w.Write(ev)
}

// Oldest is the Seq of the oldest block kept, or of the block being
// filled when none is.
func (r *Ring) Oldest() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.blocks) == 0 {
		return r.seq
	}
	return r.blocks[0].Seq
}

// Flush ends the block being filled, so that it can be taken and aged:
// the ring's blocks span no more than the time between flushes.
func (r *Ring) Flush() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.w.Flush()
}

// Take ends the block being filled and returns the blocks kept, oldest
// first; they are not changed afterwards.
func (r *Ring) Take() ([]RingBlock, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.w.Flush(); err != nil {
		return nil, err
	}
	return append([]RingBlock(nil), r.blocks...), nil
}

// RingStats are a ring's counts.
type RingStats struct {
	Bytes   int64  // of the blocks kept
	Blocks  int    // kept
	Dropped uint64 // events dropped by the memory bound before their time
	Aged    uint64 // events older than the span, let go
}

func (r *Ring) Stats() RingStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return RingStats{Bytes: r.bytes, Blocks: len(r.blocks), Dropped: r.dropped, Aged: r.aged}
}

// WriteBlock writes a block another Writer encoded (a RingBlock's Data)
// as it is, after the events written so far, and counts its records.
func (w *Writer) WriteBlock(b RingBlock) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return errClosed
	}
	if len(b.Data) < blockHeaderLen || binary.LittleEndian.Uint32(b.Data) != uint32(len(b.Data)-blockHeaderLen) {
		return errors.New("writing recording: not a whole block")
	}
	if err := w.flushBlock(); err != nil {
		return err
	}
	if err := w.writeOut(b.Data); err != nil {
		return err
	}
	w.events += int64(b.Records)
	return nil
}

var _ io.Writer = ringSink{}
