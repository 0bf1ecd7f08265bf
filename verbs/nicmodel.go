package verbs

import (
	"fmt"
	"strconv"
	"strings"
)

// nicKnobs are the NIC model's timing parameters by the names the
// workload's --sim-nic and advise's --nic take.
var nicKnobs = []struct {
	name string
	get  func(*NICModel) float64
	set  func(*NICModel, float64)
}{
	{"link-gbps", func(m *NICModel) float64 { return m.LinkGbps }, func(m *NICModel, v float64) { m.LinkGbps = v }},
	{"wqe-ns", func(m *NICModel) float64 { return float64(m.WQENS) }, func(m *NICModel, v float64) { m.WQENS = uint32(v) }},
	{"dma-read-ns", func(m *NICModel) float64 { return float64(m.DMAReadNS) }, func(m *NICModel, v float64) { m.DMAReadNS = uint32(v) }},
	{"rtt-ns", func(m *NICModel) float64 { return float64(m.RTTNS) }, func(m *NICModel, v float64) { m.RTTNS = uint32(v) }},
}

// ParseNICModel changes m's timing by a list such as
// "link-gbps=0.25,rtt-ns=20000"; the names not given keep m's values.
func ParseNICModel(s string, m NICModel) (NICModel, error) {
	for _, kv := range strings.Split(s, ",") {
		if kv = strings.TrimSpace(kv); kv == "" {
			continue
		}
		name, val, ok := strings.Cut(kv, "=")
		v, err := strconv.ParseFloat(val, 64)
		known := false
		for _, k := range nicKnobs {
			if k.name != name {
				continue
			}
			known = true
			switch {
			case !ok || err != nil || v < 0 || v > 1e9:
				return m, fmt.Errorf("NIC model %q: want %s=NUMBER, not negative", kv, name)
			case name == "link-gbps" && v == 0:
				return m, fmt.Errorf("NIC model %q: the link rate must be above 0", kv)
			}
			k.set(&m, v)
		}
		if !known {
			return m, fmt.Errorf("NIC model %q: unknown parameter (want %s)", kv, nicKnobNames())
		}
	}
	return m, nil
}

func nicKnobNames() string {
	var n []string
	for _, k := range nicKnobs {
		n = append(n, k.name)
	}
	return strings.Join(n, ", ")
}

// String is the model's timing in the form ParseNICModel reads.
func (m NICModel) String() string {
	var b []string
	for _, k := range nicKnobs {
		b = append(b, k.name+"="+strconv.FormatFloat(k.get(&m), 'f', -1, 64))
	}
	return strings.Join(b, ",")
}
