package probe

import (
	"testing"
	"time"
)

// Each process's scan takes its own bound, or what is left of the total
// when that is less, and then names the total; none is left, no scan.
func TestScanBoundsFor(t *testing.T) {
	per := ScanBounds{MaxBytes: 100 << 20, MaxTime: 5 * time.Second}
	total := ScanBounds{MaxBytes: 250 << 20, MaxTime: 12 * time.Second}
	cases := []struct {
		name             string
		per, total       ScanBounds
		used             hostScanUse
		ok               bool
		bytes            int64
		dur              time.Duration
		byteCut, timeCut bool
	}{
		{"first process: its own bound", per, total, hostScanUse{}, true, 100 << 20, 5 * time.Second, false, false},
		{"less bytes left than its own", per, total, hostScanUse{bytes: 200 << 20}, true, 50 << 20, 5 * time.Second, true, false},
		{"less time left than its own", per, total, hostScanUse{elapsed: 10 * time.Second}, true, 100 << 20, 2 * time.Second, false, true},
		{"bytes used up", per, total, hostScanUse{bytes: 250 << 20}, false, 0, 0, false, false},
		{"time used up", per, total, hostScanUse{elapsed: 13 * time.Second}, false, 0, 0, false, false},
		{"defaults", ScanBounds{}, ScanBounds{}, hostScanUse{}, true, DefaultScanBytes, DefaultScanTime, false, false},
		{"defaults, total nearly used", ScanBounds{}, ScanBounds{}, hostScanUse{bytes: DefaultScanTotalBytes - 1<<20}, true, 1 << 20, DefaultScanTime, true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, ok := scanBoundsFor(c.per, c.total, c.used)
			if ok != c.ok || b.MaxBytes != c.bytes || b.MaxTime != c.dur || (b.byteCut != "") != c.byteCut || (b.timeCut != "") != c.timeCut {
				t.Errorf("got %+v, %v; want %d bytes, %v, ok %v, total named for bytes %v, time %v",
					b, ok, c.bytes, c.dur, c.ok, c.byteCut, c.timeCut)
			}
		})
	}
}
