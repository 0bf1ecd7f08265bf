package serve

import (
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// family is one metric the collector exports: its name, help, type and
// label names, defined once. The collector hands its series either to
// client_golang (desc, for the protobuf format and tests) or to the
// exposition writer (expose.go), which writes the same families straight
// in the text formats.
type family struct {
	name, help string
	typ        prometheus.ValueType
	labels     []string
	desc       *prometheus.Desc
	id         int // index in families
	// order: the label indices by label name, the order client_golang
	// writes and sorts a series' labels in
	order []int
	// the family's header in Prometheus text and in OpenMetrics
	textHead, omHead string
}

// families are every family, by id; byName is the order they are written
// in (client_golang's: by name).
var families, byName []*family

var (
	// text format: HELP escapes backslash and newline; OpenMetrics and
	// label values escape the double quote as well
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
	quoteEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)
)

func newFamily(name, help string, typ prometheus.ValueType, labels ...string) *family {
	f := &family{name: name, help: help, typ: typ, labels: labels, id: len(families),
		desc: prometheus.NewDesc(name, help, labels, nil)}
	f.order = make([]int, len(labels))
	for i := range f.order {
		f.order[i] = i
	}
	slices.SortFunc(f.order, func(a, b int) int { return strings.Compare(labels[a], labels[b]) })
	kind, omName := "gauge", name
	if typ == prometheus.CounterValue {
		kind, omName = "counter", strings.TrimSuffix(name, "_total")
	}
	f.textHead = "# HELP " + name + " " + helpEscaper.Replace(help) + "\n# TYPE " + name + " " + kind + "\n"
	f.omHead = "# HELP " + omName + " " + quoteEscaper.Replace(help) + "\n# TYPE " + omName + " " + kind + "\n"
	families = append(families, f)
	return f
}

// sortFamilies orders byName once every family is defined.
func sortFamilies() {
	byName = slices.Clone(families)
	slices.SortFunc(byName, func(a, b *family) int { return strings.Compare(a.name, b.name) })
}
