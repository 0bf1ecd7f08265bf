package serve

import (
	"bytes"
	"math"
	"slices"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// exposer writes a scrape's series straight in the Prometheus text format
// (0.0.4) or OpenMetrics (1.0.0), without building client_golang's
// metric objects: each series is appended to one arena (its sort key and
// its rendered labels), sorted within its family and written once. Its
// buffers are kept from one render to the next (but out, which becomes the
// body scrapes share), so a render of thousands of QPs leaves little
// garbage. The output is the one client_golang
// writes for the same series, byte for byte (expose_test.go checks it):
// families by name, series by label values in label-name order.
type exposer struct {
	arena []byte
	rows  [][]row // by family id
	out   []byte
	// outHint: the size to make out with when a body took the last one
	outHint int
	// the last series' label names and values, and where its key and
	// labels are: a QP's series of families with the same labels share
	// them
	lastNames []string
	lastVals  [6]string
	last      row
}

// row is one series: arena[k0:k1] its sort key (the label values in
// label-name order, NUL-separated), arena[k1:l1] its labels as written.
type row struct {
	k0, k1, l1 int
	v          float64
}

func (x *exposer) reset() {
	x.arena = x.arena[:0]
	x.lastNames = nil
	if len(x.rows) != len(families) {
		x.rows = make([][]row, len(families))
	}
	for i := range x.rows {
		x.rows[i] = x.rows[i][:0]
	}
}

// emit records one series of f with the label values lvs (in f.labels
// order).
func (x *exposer) emit(f *family, v float64, lvs ...string) {
	if x.sameLabels(f.labels, lvs) {
		r := x.last
		r.v = v
		x.rows[f.id] = append(x.rows[f.id], r)
		return
	}
	r := row{k0: len(x.arena), v: v}
	for _, i := range f.order {
		x.arena = append(x.arena, lvs[i]...)
		x.arena = append(x.arena, 0)
	}
	r.k1 = len(x.arena)
	for n, i := range f.order {
		if n == 0 {
			x.arena = append(x.arena, '{')
		} else {
			x.arena = append(x.arena, ',')
		}
		x.arena = append(x.arena, f.labels[i]...)
		x.arena = append(x.arena, '=', '"')
		x.arena = appendQuoted(x.arena, lvs[i])
		x.arena = append(x.arena, '"')
	}
	if len(f.order) > 0 {
		x.arena = append(x.arena, '}')
	}
	r.l1 = len(x.arena)
	x.rows[f.id] = append(x.rows[f.id], r)
	x.last, x.lastNames = r, nil
	if len(lvs) <= len(x.lastVals) {
		x.lastNames = f.labels
		copy(x.lastVals[:], lvs)
	}
}

// sameLabels says whether names (the same slice) and values are the last
// series'.
func (x *exposer) sameLabels(names, vals []string) bool {
	if len(names) == 0 || len(names) != len(x.lastNames) || &names[0] != &x.lastNames[0] {
		return false
	}
	for i, v := range vals {
		if v != x.lastVals[i] {
			return false
		}
	}
	return true
}

func appendQuoted(b []byte, s string) []byte {
	if !strings.ContainsAny(s, "\\\"\n") {
		return append(b, s...)
	}
	return append(b, quoteEscaper.Replace(s)...)
}

// write renders the families recorded, merged by name with others
// (already gathered and sorted by client_golang, e.g. the process
// collector's), into x.out.
func (x *exposer) write(om bool, others []*dto.MetricFamily) error {
	if x.out == nil {
		x.out = make([]byte, 0, x.outHint)
	}
	x.out = x.out[:0]
	for _, f := range byName {
		for len(others) > 0 && others[0].GetName() < f.name {
			if err := x.encode(others[0], om); err != nil {
				return err
			}
			others = others[1:]
		}
		x.writeFamily(f, om)
	}
	for _, mf := range others {
		if err := x.encode(mf, om); err != nil {
			return err
		}
	}
	if om {
		x.out = append(x.out, "# EOF\n"...)
	}
	return nil
}

// encode appends a family gathered by client_golang, in its encoding.
func (x *exposer) encode(mf *dto.MetricFamily, om bool) error {
	buf := bytes.NewBuffer(x.out)
	var err error
	if om {
		_, err = expfmt.MetricFamilyToOpenMetrics(buf, mf)
	} else {
		_, err = expfmt.MetricFamilyToText(buf, mf)
	}
	x.out = buf.Bytes()
	return err
}

func (x *exposer) writeFamily(f *family, om bool) {
	rows := x.rows[f.id]
	if len(rows) == 0 {
		return // as client_golang: a family without series is not written
	}
	slices.SortFunc(rows, func(a, b row) int {
		return bytes.Compare(x.arena[a.k0:a.k1], x.arena[b.k0:b.k1])
	})
	if om {
		x.out = append(x.out, f.omHead...)
	} else {
		x.out = append(x.out, f.textHead...)
	}
	for _, r := range rows {
		x.out = append(x.out, f.name...)
		x.out = append(x.out, x.arena[r.k1:r.l1]...)
		x.out = append(x.out, ' ')
		x.out = appendValue(x.out, r.v, om)
		x.out = append(x.out, '\n')
	}
}

// appendValue writes v as the format does: OpenMetrics writes a whole
// number with ".0".
func appendValue(b []byte, v float64, om bool) []byte {
	switch {
	case math.IsNaN(v):
		return append(b, "NaN"...)
	case math.IsInf(v, +1):
		return append(b, "+Inf"...)
	case math.IsInf(v, -1):
		return append(b, "-Inf"...)
	}
	n := len(b)
	b = strconv.AppendFloat(b, v, 'g', -1, 64)
	if om && !bytes.ContainsAny(b[n:], "e.") {
		b = append(b, '.', '0')
	}
	return b
}
