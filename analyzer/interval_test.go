package analyzer

import "testing"

// The signal interval kept as runs end is the most common run plus one,
// the shortest of equally common runs, as counting them all again says.
func TestTypicalIntervalKept(t *testing.T) {
	tests := []struct {
		name string
		runs []uint64
		want uint64
	}{
		{"none", nil, 0},
		{"one run", []uint64{15}, 16},
		{"the most common", []uint64{3, 15, 15, 3, 15}, 16},
		{"the shortest of equals", []uint64{15, 3, 15, 3}, 4},
		{"equals found later", []uint64{15, 15, 3, 3}, 4},
		{"long runs", []uint64{100, 200, 200, 100, 100}, 101},
		{"long against short", []uint64{200, 200, 7}, 201},
		{"short wins a tie with long", []uint64{200, 7, 200, 7}, 8},
		{"zero-length runs", []uint64{0, 0, 5}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q := &sq{}
			for _, r := range tc.runs {
				q.curRun = r
				q.endRun()
			}
			if got := q.typicalInterval(); got != tc.want {
				t.Fatalf("typical interval %d, want %d", got, tc.want)
			}
		})
	}
}
