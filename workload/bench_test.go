package workload

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkSim measures untraced simulator throughput on one QP, inline
// 64 B SENDs with a CQE every 16th WR, for one and 16 WRs per post call.
func BenchmarkSim(b *testing.B) {
	for _, l := range []uint32{1, 16} {
		b.Run(fmt.Sprintf("post_list=%d", l), func(b *testing.B) {
			c := Defaults()
			c.Size, c.InlineSize, c.CQMod, c.TxDepth, c.PostList = 64, 64, 16, 128, l
			c.Iters = uint64(max(b.N, int(l)))
			if err := c.Validate(true); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			r, err := Run(context.Background(), c)
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			q := r.QPs[0]
			b.ReportMetric(float64(q.App.WRs)/q.App.Seconds, "WR/s")
			b.ReportMetric(q.App.AvgPostNS, "ns/post_call")
		})
	}
}
