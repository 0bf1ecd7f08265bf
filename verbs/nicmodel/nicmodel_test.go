package nicmodel

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	base := Model{LinkGbps: 100, WQENS: 10, DMAReadNS: 450, RTTNS: 1500, PreferBF: true}
	for _, tc := range []struct {
		name, in, want, err string
	}{
		{"none", "", "link-gbps=100,wqe-ns=10,dma-read-ns=450,rtt-ns=1500", ""},
		{"two", "link-gbps=0.25, rtt-ns=20000", "link-gbps=0.25,wqe-ns=10,dma-read-ns=450,rtt-ns=20000", ""},
		{"all", "link-gbps=25,wqe-ns=5,dma-read-ns=900,rtt-ns=0", "link-gbps=25,wqe-ns=5,dma-read-ns=900,rtt-ns=0", ""},
		{"unknown", "pcie-gen=5", "", "unknown parameter"},
		{"no value", "rtt-ns", "", "want rtt-ns=NUMBER"},
		{"negative", "wqe-ns=-1", "", "not negative"},
		{"zero link", "link-gbps=0", "", "above 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Parse(tc.in, base)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || m.String() != tc.want || !m.PreferBF {
				t.Errorf("got %s, %v; want %s", m, err, tc.want)
			}
		})
	}
}
