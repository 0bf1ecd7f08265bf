package export

import (
	"strings"
	"testing"
	"time"

	"github.com/sqscope/sqscope/trace"
)

func TestParseTime(t *testing.T) {
	start := time.Date(2026, 12, 1, 23, 59, 0, 0, time.Local)
	info := trace.FileInfo{StartWall: start, StartMonoNS: 1_000_000_000}
	tests := []struct {
		in   string
		want uint64 // on the trace clock, with the recording starting at 5 s when it has no start
		err  string
	}{
		{"0", 1_000_000_000, ""},
		{"12.5", 13_500_000_000, ""},
		{"1m30s", 91_000_000_000, ""},
		{"250ms", 1_250_000_000, ""},
		{start.Add(2 * time.Second).UTC().Format(time.RFC3339Nano), 3_000_000_000, ""},
		{"23:59:01.5", 2_500_000_000, ""},
		{"00:00:30", 91_000_000_000, ""}, // past midnight: the next day
		{"-3", 0, "cannot be negative"},
		{"-2s", 0, "cannot be negative"},
		{"noon", 0, "want seconds from the start"},
		{"NaN", 0, "cannot be negative"},
		{"1e308", 0, "more seconds than the trace clock counts"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			tm, err := ParseTime(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := tm.monoNS(info.StartMonoNS, &info)
			if err != nil || got != tc.want {
				t.Errorf("%d (%v), want %d", got, err, tc.want)
			}
		})
	}
	// a wall-clock time needs the recording's start on both clocks
	tm, _ := ParseTime("23:59:01")
	if _, err := tm.monoNS(5, &trace.FileInfo{}); err == nil || !strings.Contains(err.Error(), "does not say when it started") {
		t.Errorf("a wall-clock time on a recording without its start: %v", err)
	}
}

func TestParseNumbers(t *testing.T) {
	tests := []struct {
		in   string
		want string
		err  bool
	}{
		{"0x1c2", "450", false},
		{"450,0x1c3, 7", "450,451,7", false},
		{"1c2", "", true},
		{"", "", true},
		{"0x1ffffffff", "", true},
	}
	for _, tc := range tests {
		var n Numbers
		err := n.Set(tc.in)
		if (err != nil) != tc.err || !tc.err && n.String() != tc.want {
			t.Errorf("Set(%q): %q, %v", tc.in, n.String(), err)
		}
	}
}

// The filter flags parse what a user types; whatever it is, they return a
// value or an error, never a panic, and a value maps to the trace clock.
func FuzzParseTime(f *testing.F) {
	for _, s := range []string{"12.5", "1m", "2026-12-01T10:00:05Z", "10:00:05.25", "25:00", "1e308", "NaN", "-0"} {
		f.Add(s)
	}
	info := trace.FileInfo{StartWall: time.Unix(1700000000, 0), StartMonoNS: 1e9}
	f.Fuzz(func(t *testing.T, s string) {
		tm, err := ParseTime(s)
		if err != nil {
			return
		}
		tm.monoNS(info.StartMonoNS, &info)
		var n Numbers
		n.Set(s)
	})
}
