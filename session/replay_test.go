package session

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/trace"
)

// The test recording: a QP created at t0, then one single-WR post every
// 100 ms for 10 s (posts 1..100), flushed as one block per second of trace
// time, so second s is block s.
const (
	recT0       = uint64(5_000_000_000_000)
	recStep     = 100 * time.Millisecond
	recPosts    = 100
	postsPerSec = 10
)

type recording struct {
	data []byte
	// blockEnd[s] is the file size once second s (posts up to 10*s) is
	// written; blockEnd[0] is the end of the file header.
	blockEnd [recPosts/postsPerSec + 1]int
	// unclosed is the size before Close wrote the end block.
	unclosed int
}

func writeRecording(t *testing.T) recording {
	t.Helper()
	path := filepath.Join(t.TempDir(), "rec.sqscope")
	w, err := trace.Create(path, trace.FileInfo{Target: "replay test", TargetPID: 42})
	if err != nil {
		t.Fatal(err)
	}
	var rec recording
	rec.blockEnd[0] = int(w.Bytes())
	h := trace.Header{TimeNS: recT0, PID: 42}
	if err := w.Write(&trace.QPCreate{Header: h, QP: 0x1000, QPNum: 0x100, Type: trace.QPTypeRC, SendCQ: 0x2000,
		Caps: trace.Caps{MaxSendWR: 1024, MaxSendSGE: 1, MaxInlineData: 64}, Via: "ibv_create_qp"}); err != nil {
		t.Fatal(err)
	}
	for k := 1; k <= recPosts; k++ {
		h.TimeNS = recT0 + uint64(k)*uint64(recStep)
		p := &trace.Post{Header: h, QP: 0x1000, QPNum: 0x100, EntryNS: h.TimeNS - 500, Accepted: 1,
			WRs: []trace.WR{{ID: uint64(k), Opcode: 2, NumSGE: 1, Bytes: 256}}}
		if err := w.Write(p); err != nil {
			t.Fatal(err)
		}
		if k%postsPerSec == 0 {
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			rec.blockEnd[k/postsPerSec] = int(w.Bytes())
		}
	}
	rec.unclosed = int(w.Bytes())
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if rec.data, err = os.ReadFile(path); err != nil {
		t.Fatal(err)
	}
	if len(rec.data) <= rec.unclosed || rec.unclosed != rec.blockEnd[len(rec.blockEnd)-1] {
		t.Fatalf("file of %d bytes, %d before its end block, blocks end at %v", len(rec.data), rec.unclosed, rec.blockEnd)
	}
	return rec
}

// opener hands out readers of data and counts the opens (a backward seek
// re-reads the recording from the start).
type opener struct {
	data     func(n int) []byte // the bytes the n-th open (from 1) reads
	failFrom int                // opens from this one on fail (0: none)
	opens    int
}

var errGone = errors.New("recording removed")

func (o *opener) open() (*trace.Reader, error) {
	o.opens++
	if o.failFrom > 0 && o.opens >= o.failFrom {
		return nil, errGone
	}
	return trace.NewReader(bytes.NewReader(o.data(o.opens)))
}

func always(b []byte) func(int) []byte { return func(int) []byte { return b } }

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

// newFakeReplay builds a Replay driven by a fake wall clock.
func newFakeReplay(t *testing.T, o *opener) (*Replay, *fakeClock) {
	t.Helper()
	clk := &fakeClock{t: time.Unix(1_000_000, 0)}
	r, err := newReplay(o.open, analyzer.Options{}, clk.now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r, clk
}

// played is what a snapshot says has been replayed.
type played struct {
	Events, PostCalls, WRs uint64
}

func snap(r *Replay) played {
	s, _ := r.Snapshot(analyzer.SnapshotOptions{})
	return played{s.Events, s.Total.PostCalls, s.Total.WRs}
}

// at is what the test recording holds up to trace position pos: the QP
// creation and the posts at or before it.
func at(pos time.Duration) played {
	n := uint64(min(pos/recStep, recPosts))
	return played{Events: 1 + n, PostCalls: n, WRs: n}
}

func TestReplayPaceSpeedPauseSeek(t *testing.T) {
	rec := writeRecording(t)
	o := &opener{data: always(rec.data)}
	r, clk := newFakeReplay(t, o)

	for _, step := range []struct {
		name  string
		act   func()
		pos   time.Duration
		opens int
	}{
		{"start", func() {}, 0, 2},
		{"2 s of wall time at speed 1", func() { clk.advance(2 * time.Second) }, 2 * time.Second, 2},
		{"speed 2 doubles the pace", func() {
			if got := r.Speed(2); got != 2 {
				t.Errorf("Speed(2) = %v, want 2", got)
			}
			clk.advance(time.Second)
		}, 4 * time.Second, 2},
		{"paused: no progress", func() {
			r.SetPaused(true)
			clk.advance(5 * time.Second)
		}, 4 * time.Second, 2},
		{"resumed at speed 2", func() {
			r.SetPaused(false)
			clk.advance(250 * time.Millisecond)
		}, 4500 * time.Millisecond, 2},
		{"seek +5 s", func() { r.Seek(5 * time.Second) }, 9500 * time.Millisecond, 2},
		{"seek -3 s re-reads from the start", func() { r.Seek(-3 * time.Second) }, 6500 * time.Millisecond, 3},
		{"a paused seek moves, then stays", func() {
			r.SetPaused(true)
			r.Seek(time.Second)
			clk.advance(10 * time.Second)
		}, 7500 * time.Millisecond, 3},
		{"played past the end stops at the end", func() {
			r.SetPaused(false)
			clk.advance(time.Minute)
		}, 10 * time.Second, 3},
		{"seek back past the start stops at the start", func() { r.Seek(-time.Hour) }, 0, 4},
		{"seek forward past the end stops at the end", func() { r.Seek(time.Hour) }, 10 * time.Second, 4},
	} {
		t.Run(step.name, func(t *testing.T) {
			step.act()
			got := snap(r)
			pos, length := r.Position()
			if pos != step.pos || length != 10*time.Second {
				t.Errorf("position %v of %v, want %v of 10s", pos, length, step.pos)
			}
			if want := at(step.pos); got != want {
				t.Errorf("snapshot holds %+v, want %+v", got, want)
			}
			if o.opens != step.opens {
				t.Errorf("recording opened %d times, want %d", o.opens, step.opens)
			}
			if err := r.Err(); err != nil {
				t.Errorf("Err() = %v", err)
			}
		})
	}
}

// A view asking again at the version it holds gets no snapshot while the
// replay stands still, and one when it moves: played on, or read again
// from the start.
func TestReplaySnapshotSince(t *testing.T) {
	rec := writeRecording(t)
	r, clk := newFakeReplay(t, &opener{data: always(rec.data)})
	clk.advance(2 * time.Second)
	first, ok := r.Snapshot(analyzer.SnapshotOptions{})
	if !ok {
		t.Fatal("no first snapshot")
	}
	r.SetPaused(true)
	clk.advance(time.Second)
	if _, ok := r.Snapshot(analyzer.SnapshotOptions{Since: first.Version}); ok {
		t.Fatal("a paused replay took a snapshot at the version held")
	}
	r.SetPaused(false)
	clk.advance(time.Second)
	played, ok := r.Snapshot(analyzer.SnapshotOptions{Since: first.Version})
	if !ok || played.Total.PostCalls <= first.Total.PostCalls {
		t.Fatalf("after a second played: %v, %d post calls (were %d)", ok, played.Total.PostCalls, first.Total.PostCalls)
	}
	r.Seek(-time.Hour)
	if again, ok := r.Snapshot(analyzer.SnapshotOptions{Since: played.Version}); !ok || again.Total.PostCalls != 0 {
		t.Fatalf("after a seek to the start: %v, %d post calls", ok, again.Total.PostCalls)
	}
}

func TestReplaySpeedBounds(t *testing.T) {
	rec := writeRecording(t)
	for _, c := range []struct {
		name    string
		factors []float64
		want    float64
	}{
		{"unchanged", []float64{1}, 1},
		{"faster and back", []float64{4, 0.25}, 1},
		{"slower", []float64{0.5, 0.5}, 0.25},
		{"capped at 1024", []float64{1e6}, 1024},
		{"floored at 1/64", []float64{1e-6}, 1.0 / 64},
		{"back from the cap", []float64{1e6, 0.5}, 512},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, clk := newFakeReplay(t, &opener{data: always(rec.data)})
			var got float64
			for _, f := range c.factors {
				got = r.Speed(f)
			}
			if got != c.want {
				t.Fatalf("speed %v, want %v", got, c.want)
			}
			wall := 10 * time.Millisecond
			clk.advance(wall)
			r.Snapshot(analyzer.SnapshotOptions{})
			if pos, _ := r.Position(); pos != min(time.Duration(float64(wall)*c.want), 10*time.Second) {
				t.Errorf("after %v of wall time at x%v: position %v", wall, c.want, pos)
			}
		})
	}
}

// TestReplayDamagedRecording plays recordings cut or damaged at known
// places to their end.
func TestReplayDamagedRecording(t *testing.T) {
	rec := writeRecording(t)
	cut := func(n int) []byte { return rec.data[:n] }
	// flip one byte in the payload of block 7 (posts 61..70)
	corrupt := bytes.Clone(rec.data)
	corrupt[(rec.blockEnd[6]+rec.blockEnd[7])/2] ^= 0xff
	midBlock6 := (rec.blockEnd[5] + rec.blockEnd[6]) / 2

	for _, c := range []struct {
		name string
		data func(open int) []byte
		// the posts replayed, and the recording's length
		posts  int
		length time.Duration
		// corrupt: the damage must be reported, by NewReplay or by Err
		corrupt bool
	}{
		{"complete", always(rec.data), 100, 10 * time.Second, false},
		{"no end block", always(cut(rec.unclosed)), 100, 10 * time.Second, false},
		{"cut between blocks", always(cut(rec.blockEnd[5])), 50, 5 * time.Second, false},
		{"cut inside the end block", always(cut(len(rec.data) - 3)), 100, 10 * time.Second, false},
		// a block cut short is lost whole: its records cannot be decompressed
		{"cut mid-block", always(cut(midBlock6)), 50, 5 * time.Second, false},
		{"corrupt block", always(corrupt), 60, 6 * time.Second, true},
		{"damaged after it was opened", func(n int) []byte {
			if n == 1 {
				return rec.data // NewReplay's first read sees it whole
			}
			return corrupt
		}, 60, 10 * time.Second, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			length := c.length
			if length == 0 {
				length = time.Duration(c.posts) * recStep
			}
			o := &opener{data: c.data}
			clk := &fakeClock{t: time.Unix(1_000_000, 0)}
			r, err := newReplay(o.open, analyzer.Options{}, clk.now)
			if err != nil {
				var ce *trace.CorruptError
				if c.corrupt && errors.As(err, &ce) {
					t.Logf("reported when opened: %v", err)
					return
				}
				t.Fatalf("NewReplay: %v", err)
			}
			defer r.Close()
			clk.advance(time.Hour)
			got := snap(r)
			if want := at(time.Duration(c.posts) * recStep); got != want {
				t.Errorf("replayed %+v, want %+v", got, want)
			}
			if pos, l := r.Position(); pos != length || l != length {
				t.Errorf("position %v of %v, want the end, %v", pos, l, length)
			}
			// the first read saw where the file stops early or is damaged
			wantWarn := c.name != "complete" && c.name != "damaged after it was opened"
			if w := r.Warning(); (w != "") != wantWarn || wantWarn && !strings.Contains(w, "stops early") {
				t.Errorf("Warning() = %q, want one: %v", w, wantWarn)
			}
			err = r.Err()
			var ce *trace.CorruptError
			switch {
			case c.corrupt && !errors.As(err, &ce):
				t.Errorf("Err() = %v, want a *trace.CorruptError", err)
			case !c.corrupt && err != nil:
				t.Errorf("Err() = %v, want nil", err)
			}
		})
	}
}

// TestReplaySeekBackReopenFails: a backward seek that cannot open the
// recording again reports why and leaves the position alone.
func TestReplaySeekBackReopenFails(t *testing.T) {
	rec := writeRecording(t)
	o := &opener{data: always(rec.data), failFrom: 3}
	r, clk := newFakeReplay(t, o)
	clk.advance(4 * time.Second)
	if got, want := snap(r), at(4*time.Second); got != want {
		t.Fatalf("replayed %+v, want %+v", got, want)
	}
	r.Seek(-2 * time.Second)
	if err := r.Err(); !errors.Is(err, errGone) {
		t.Errorf("Err() = %v, want %v", err, errGone)
	}
	if pos, _ := r.Position(); pos != 4*time.Second {
		t.Errorf("position %v after a failed seek, want 4s", pos)
	}
}
