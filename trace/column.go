package trace

import "encoding/binary"

// columnBatch is how many of a block's varying values are decoded at once.
const columnBatch = 256

// column reads a version 2 block's column of varying values (see
// recordCodec.varying) a batch at a time: a tight loop decodes the next
// values, and a record takes each in turn, instead of a call that decodes
// it. A malformed value ends a batch; reading it fails as reading the
// bytes one by one would have, so every error comes where it came before.
type column struct {
	raw   []byte
	from  int      // where vals[0] starts in raw
	pos   int      // where the values after vals start in raw
	vals  []uint64 // the batch, in batch
	batch [columnBatch]uint64
	k     int   // the next value of the batch to read
	err   error // the first failed read; sticks, and later reads return 0
}

func (c *column) begin(raw []byte) {
	c.raw, c.from, c.pos, c.vals, c.k, c.err = raw, 0, 0, nil, 0, nil
}

// fill decodes the next batch; false when there is no value left to
// decode, or it is malformed.
func (c *column) fill() bool {
	raw, i, n := c.raw, c.pos, 0
	vals := c.batch[:]
	for ; n < len(vals) && i < len(raw); n++ {
		b := raw[i]
		if b < 0x80 {
			vals[n] = uint64(b)
			i++
			continue
		}
		if i+1 < len(raw) && raw[i+1] < 0x80 { // times: most take two bytes
			vals[n] = uint64(b&0x7f) | uint64(raw[i+1])<<7
			i += 2
			continue
		}
		v, m := binary.Uvarint(raw[i:])
		if m <= 0 {
			break
		}
		vals[n] = v
		i += m
	}
	c.from, c.pos, c.vals, c.k = c.pos, i, vals[:n], 0
	return n > 0
}

// u64 reads the next value as a u.
func (c *column) u64() uint64 {
	if c.k < len(c.vals) {
		v := c.vals[c.k]
		c.k++
		return v
	}
	return c.next()
}

// next reads the value after a batch.
func (c *column) next() uint64 {
	if c.err != nil || !c.fill() {
		c.fail()
		return 0
	}
	c.k++
	return c.vals[0]
}

// z64 reads the next value as a z.
func (c *column) z64() int64 { return unzig(c.u64()) }

func (c *column) fail() {
	if c.err == nil {
		c.err = errBadVarint
	}
}

// mark is where the reads are, for reset to come back to.
func (c *column) mark() (from, k int) { return c.from, c.k }

// reset comes back to a mark, as if the reads since had not been made.
func (c *column) reset(from, k int) {
	if c.from != from {
		c.pos = from
		c.fill()
	}
	c.k, c.err = k, nil
}

// left counts the bytes of the column after the values read.
func (c *column) left() int {
	if c.err != nil {
		return 0
	}
	i := c.from
	if c.k == len(c.vals) {
		i = c.pos
	} else {
		for range c.k {
			_, n := binary.Uvarint(c.raw[i:])
			i += n
		}
	}
	return len(c.raw) - i
}
