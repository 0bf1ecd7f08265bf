package trace

import (
	"testing"
	"time"
)

func TestWallAnchor(t *testing.T) {
	wall := time.Date(2026, 12, 1, 4, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		anchor WallAnchor
		ns     uint64
		want   time.Time
		ok     bool
	}{
		{"unknown", WallAnchor{}, 5, time.Time{}, false},
		{"no monotonic reading", WallAnchor{Wall: wall}, 5, time.Time{}, false},
		{"at the anchor", WallAnchor{Wall: wall, MonoNS: 1e9}, 1e9, wall, true},
		{"after", WallAnchor{Wall: wall, MonoNS: 1e9}, 3_500_000_000, wall.Add(2500 * time.Millisecond), true},
		{"before (an event older than the session's start)", WallAnchor{Wall: wall, MonoNS: 1e9}, 250_000_000,
			wall.Add(-750 * time.Millisecond), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := tc.anchor.At(tc.ns)
			if ok != tc.ok || !got.Equal(tc.want) {
				t.Fatalf("At(%d) = %v, %v; want %v, %v", tc.ns, got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestFileInfoAnchor(t *testing.T) {
	wall := time.Date(2026, 12, 1, 4, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		fi   FileInfo
		want WallAnchor
	}{
		{"both start times", FileInfo{StartWall: wall, StartMonoNS: 7}, WallAnchor{Wall: wall, MonoNS: 7}},
		{"no wall time", FileInfo{StartMonoNS: 7}, WallAnchor{}},
		{"no monotonic time", FileInfo{StartWall: wall}, WallAnchor{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.fi.Anchor(); got != tc.want {
				t.Fatalf("Anchor() = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestNowAnchor(t *testing.T) {
	before := MonotonicNS()
	a := NowAnchor()
	after := MonotonicNS()
	if a.MonoNS < before || a.MonoNS > after || a.Wall.IsZero() {
		t.Fatalf("NowAnchor() = %+v, want a monotonic reading in [%d, %d] and a wall time", a, before, after)
	}
}
