package export

import "testing"

func TestUsec(t *testing.T) {
	tests := []struct {
		ns   uint64
		want string
	}{
		{0, "0.000"}, {1, "0.001"}, {999, "0.999"}, {1000, "1.000"}, {1234567, "1234.567"},
		{18446744073709551615, "18446744073709551.615"},
	}
	for _, tc := range tests {
		if got := string(usec(tc.ns)); got != tc.want {
			t.Errorf("usec(%d) = %s, want %s", tc.ns, got, tc.want)
		}
	}
}
