package errsite

import (
	"fmt"
	"strings"

	"github.com/sqscope/sqscope/ibv"
)

// ErrnoName names a site's error: the errno's name, or where the value
// is read at run time.
func (s Site) ErrnoName() string {
	if s.Errno == 0 {
		return "value in " + s.ErrnoAt.String()
	}
	return ibv.ErrnoName(int32(s.Errno))
}

// String is the report as text: the function, then one block per site.
func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s at %#x-%#x: %d instructions in %d range(s), %d reached from the entry\n",
		r.Func.Role, r.Func.Start, r.Func.End, r.Insts, len(r.Regions), r.Reached)
	for _, g := range r.Regions {
		how := "given bounds"
		if g.FromFDE {
			how = "FDE"
		}
		fmt.Fprintf(&b, "  code %#x-%#x (%s)\n", g.Start, g.End, how)
	}
	fmt.Fprintf(&b, "  stack depth checked against the unwind table at %d instructions, %d disagree\n", r.CFAChecked, r.CFAMismatch)
	if len(r.Sites) == 0 {
		b.WriteString("  no error site found: a sentinel needs windows of full probes here\n")
	}
	for _, s := range r.Sites {
		how := "returns it on every path"
		if !s.Exact {
			how = "fails on every path (a later error may replace it)"
		}
		fmt.Fprintf(&b, "  site %#x  %-34s %s, %s\n", s.Offset, s.Inst, s.ErrnoName(), how)
		fmt.Fprintf(&b, "    qp in %s", s.QP)
		if r.Func.Role == PostSend {
			fmt.Fprintf(&b, ", wr in %s", s.WR)
		}
		causes := make([]string, len(s.Causes))
		for i, c := range s.Causes {
			causes[i] = c.String()
		}
		fmt.Fprintf(&b, "; cause %s\n", strings.Join(causes, " or "))
		for _, g := range s.Guards {
			if g.Entry {
				b.WriteString("    from the entry, no branch\n")
				continue
			}
			dir := "not taken"
			if g.Taken {
				dir = "taken"
			}
			fmt.Fprintf(&b, "    from %#x %s (%s) after %q: %s -> %s\n", g.Branch, g.Inst, dir, g.Compare, g.Operands, g.Cause)
		}
	}
	for _, x := range r.Rejected {
		fmt.Fprintf(&b, "  not a site %#x  %s: %s\n", x.Offset, x.Inst, x.Why)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "  note: %s\n", n)
	}
	return b.String()
}
