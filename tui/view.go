package tui

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
	"strconv"

	"github.com/sqscope/sqscope/analyzer"
)

// grouping is how the table groups its rows (g cycles through them).
type grouping int

const (
	groupNone grouping = iota
	groupProcess
	groupCQ
	groupings
)

func (g grouping) String() string {
	return [...]string{"", "process", "CQ"}[g]
}

// entry is one line of the table below its header: a QP (row, an index in
// UI.rows) or, when grouping, a group's header (group, an index in
// UI.groups, and row -1).
type entry struct {
	row   int32
	group int32
}

// group is a group header: its QPs shown and their totals, in a row the
// columns draw like any other (total.label names the group).
type group struct {
	n     int
	total row
	qp    analyzer.QP // the total's QP fields (depth, peak, model)
	c     analyzer.Counters
}

// groupKey is what a row is grouped by: its pid, and for CQs the send CQ's
// address and generation.
type groupKey struct {
	pid   uint32
	cq    uint64
	cqGen uint64
}

func (u *UI) groupOf(r *row) groupKey {
	switch u.grouping {
	case groupProcess:
		return groupKey{pid: r.key.pid}
	case groupCQ:
		return groupKey{pid: r.key.pid, cq: r.qp.SendCQ, cqGen: r.qp.SendCQGen}
	}
	return groupKey{}
}

func (k groupKey) compare(o groupKey) int {
	return cmp.Or(cmp.Compare(k.pid, o.pid), cmp.Compare(k.cq, o.cq), cmp.Compare(k.cqGen, o.cqGen))
}

func (k groupKey) label(g grouping) string {
	if g == groupCQ {
		if k.cq == 0 {
			return fmt.Sprintf("pid %d CQ ?", k.pid)
		}
		return fmt.Sprintf("pid %d CQ %#x", k.pid, k.cq)
	}
	return fmt.Sprintf("pid %d", k.pid)
}

// matches reports whether the filter is in the row's QP number (hex and
// decimal), pid or type, formatted into a reused buffer: a filter over
// thousands of rows allocates nothing per row.
func (u *UI) matches(r *row) bool {
	b := append(u.filterBuf[:0], "0x"...)
	b = strconv.AppendUint(b, uint64(r.key.qpNum), 16)
	b = append(b, ' ')
	b = strconv.AppendUint(b, uint64(r.key.qpNum), 10)
	b = append(b, ' ')
	b = strconv.AppendUint(b, uint64(r.key.pid), 10)
	b = append(b, ' ')
	b = append(b, r.qp.Type...)
	u.filterBuf = b
	return bytes.Contains(b, []byte(u.filter))
}

// byKey orders rows by pid and QP number.
func byKey(a, b *row) bool {
	if a.key.pid != b.key.pid {
		return a.key.pid < b.key.pid
	}
	return a.key.qpNum < b.key.qpNum
}

// arrange makes the table's lines: the rows the filter keeps, in groups
// when grouping, each group's rows in the sort column's order (ties by pid
// and QP number). It sorts indices, never the rows themselves.
func (u *UI) arrange() {
	u.order = u.order[:0]
	for i := range u.rows {
		if u.filter == "" || u.matches(&u.rows[i]) {
			u.order = append(u.order, int32(i))
		}
	}
	less := columns[u.sortCol].less
	if less == nil {
		less = byKey
	}
	u.keys = u.keys[:0]
	for i := range u.rows {
		u.keys = append(u.keys, u.groupOf(&u.rows[i]))
	}
	order := func(i, j int32) int {
		if c := u.keys[i].compare(u.keys[j]); c != 0 {
			return c
		}
		a, b := &u.rows[i], &u.rows[j]
		if u.sortDesc {
			a, b = b, a
		}
		switch {
		case less(a, b):
			return -1
		case less(b, a):
			return 1
		}
		// ties by pid and QP number, whatever the direction
		if u.sortDesc {
			a, b = b, a
		}
		return cmp.Or(cmp.Compare(a.key.pid, b.key.pid), cmp.Compare(a.key.qpNum, b.key.qpNum))
	}
	// the snapshot's own order (pid, QP number) needs no sort
	if !slices.IsSortedFunc(u.order, order) {
		slices.SortStableFunc(u.order, order)
	}
	u.lines = u.lines[:0]
	u.groups = u.groups[:0]
	var cur groupKey
	for k, i := range u.order {
		r := &u.rows[i]
		if u.grouping != groupNone {
			if gk := u.keys[i]; k == 0 || gk != cur {
				cur = gk
				u.groups = append(u.groups, group{})
				u.groups[len(u.groups)-1].total.label = gk.label(u.grouping)
				u.lines = append(u.lines, entry{row: -1, group: int32(len(u.groups) - 1)})
			}
			u.groups[len(u.groups)-1].add(r)
		}
		u.lines = append(u.lines, entry{row: i, group: int32(len(u.groups) - 1)})
	}
	for i := range u.groups {
		u.groups[i].finish()
	}
}

// add counts a QP in the group's totals.
func (g *group) add(r *row) {
	g.n++
	if g.n == 1 {
		g.qp.CountersOnly = true
	}
	g.c.Add(r.c)
	g.qp.MaxSendWR += r.qp.MaxSendWR
	g.qp.CapsKnown = true
	g.qp.CountersOnly = g.qp.CountersOnly && r.qp.CountersOnly
	if r.qp.Model != "" {
		g.qp.Model = r.qp.Model
	}
	t := &g.total
	if r.qp.Measured("outstanding") {
		t.occupancy += r.occupancy
	}
	t.wrsPS += r.wrsPS
	t.dmaSaved += r.dmaSaved
	t.cqeSaved += r.cqeSaved
	if statusRank(r.status) > statusRank(t.status) {
		t.status = r.status
	}
}

// finish points the total row at the group's sums.
func (g *group) finish() {
	g.qp.Counters = g.c
	g.qp.Outstanding = g.total.occupancy
	g.qp.Type = fmt.Sprintf("%d QPs", g.n)
	g.total.qp, g.total.c = &g.qp, &g.c
	if g.total.status == "" {
		g.total.status = notMeasured
	}
}

// statusRank orders statuses by how bad they are, for a group's worst.
func statusRank(s string) int {
	switch s {
	case "OVERFLOW", "ENOMEM":
		return 3
	case "NEAR FULL":
		return 2
	case "OK":
		return 1
	case notMeasured:
		return 0
	}
	return -1
}

func (u *UI) render() {
	u.arrange()
	u.renderPartial()
}

// renderPartial is render but for the order, the filter and the groups,
// which follow whole snapshots (apply.go).
func (u *UI) renderPartial() {
	u.renderHeader()
	u.renderTable()
	u.renderDetail()
	u.renderAlerts()
	u.renderFooter()
}
