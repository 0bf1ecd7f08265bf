package trace

import (
	"encoding/binary"
	"hash/crc32"
	"testing"
)

// Version 1 as its writer wrote it: what the Writer wrote before version
// 2, kept to make the files of version 1 the reader must go on reading.

// versions are the format versions the reader reads.
var versions = []uint16{1, FormatVersion}

// writeRecordingV1 writes events as a version 1 writer did: chunks of
// records, each written once it reaches target bytes (0: 64 KiB, version
// 1's), then an end chunk.
func writeRecordingV1(t testing.TB, events []Event, target int) []byte {
	t.Helper()
	if target == 0 {
		target = 64 << 10
	}
	info := testInfo
	out, err := fileHeader(&info, 1)
	if err != nil {
		t.Fatal(err)
	}
	e := newEncoder(1)
	chunk := make([]byte, chunkHeaderLen)
	count := uint32(0)
	flush := func() {
		if count == 0 {
			return
		}
		putChunkHeader(chunk, count)
		out = append(out, chunk...)
		chunk, count = chunk[:chunkHeaderLen], 0
		e.reset()
	}
	for _, ev := range events {
		if chunk, err = e.appendRecord(chunk, ev); err != nil {
			t.Fatalf("Write(%s): %v", ev.Kind(), err)
		}
		if count++; len(chunk)-chunkHeaderLen >= target {
			flush()
		}
	}
	flush()
	end := make([]byte, chunkHeaderLen+endChunkLen)
	binary.LittleEndian.PutUint64(end[chunkHeaderLen:], uint64(len(events)))
	putChunkHeader(end, 0)
	return append(out, end...)
}

// writeRecordingIn writes events in the given format version (see
// writeRecording and writeRecordingV1).
func writeRecordingIn(t testing.TB, version uint16, events []Event, target int) []byte {
	t.Helper()
	if version == 1 {
		return writeRecordingV1(t, events, target)
	}
	return writeRecording(t, events, target)
}

// putChunkHeader fills the first chunkHeaderLen bytes of a version 1
// chunk from the payload that follows them.
func putChunkHeader(c []byte, count uint32) {
	payload := c[chunkHeaderLen:]
	binary.LittleEndian.PutUint32(c[0:], uint32(len(payload)))
	binary.LittleEndian.PutUint32(c[4:], count)
	binary.LittleEndian.PutUint32(c[8:], crc32.Checksum(payload, castagnoli))
}
