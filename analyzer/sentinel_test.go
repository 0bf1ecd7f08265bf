package analyzer

import (
	"testing"

	"github.com/sqscope/sqscope/analyzer/streamtest"
	"github.com/sqscope/sqscope/ibv"
	"github.com/sqscope/sqscope/trace"
)

// An SQ-full refusal seen at an error site, nothing else of the queue
// traced: rxe names its cause from the refused WR (a SEND waits on the
// peer's receives: the RNR retry; another opcode: WRs not completing),
// mlx5, whose cause needs the signaled WRs outstanding and the polls,
// says only that the queue was full there.
func TestSiteOverflowCause(t *testing.T) {
	const qpn = 0x11
	for _, c := range []struct {
		name, lib string
		op        uint8
		want      string
	}{
		{"rxe SEND", "/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so", ibv.WRSend, "sq_overflow_rnr_retry"},
		{"rxe WRITE", "/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so", ibv.WRRDMAWrite, "sq_overflow_not_completing"},
		{"mlx5 SEND", "/usr/lib/x86_64-linux-gnu/libibverbs/libmlx5-rdmav34.so", ibv.WRSend, "sq_overflow_at_error_site"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := streamtest.New()
			s.Add(&trace.Attach{Header: s.Header(), Func: "post_send", Path: c.lib, How: trace.HowErrorSite})
			s.CreateOn(qpn, streamtest.RCCaps(64, 64, 1), c.lib)
			s.ToRTS(qpn)
			s.Add(&trace.PostFail{Header: s.Header(), QP: streamtest.QPAddr(qpn), QPNum: qpn, Func: "post_send",
				Errno: ibv.ENOMEM, State: ibv.QPSRTS, SiteCauses: "queue_full", HasWR: true,
				WR: trace.WR{Opcode: c.op, NumSGE: 1, Bytes: 64, Flags: ibv.SendSignaled}})
			snap, q := oneQP(t, s)
			if q.ENOMEMSQFull != 1 {
				t.Errorf("enomem_sq_full %d, want the one refusal", q.ENOMEMSQFull)
			}
			if len(snap.Diagnoses) != 1 || snap.Diagnoses[0].Kind != c.want {
				t.Fatalf("diagnoses %+v, want one %s", snap.Diagnoses, c.want)
			}
			d := snap.Diagnoses[0]
			if _, ok := d.Evidence["outstanding"]; ok {
				t.Errorf("evidence %v: the WRs outstanding were not traced, want them absent", d.Evidence)
			}
			t.Logf("%s: %s\n  fix: %s", d.Kind, d.Message, d.Fix)
		})
	}
}
