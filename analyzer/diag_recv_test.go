package analyzer

import (
	"maps"
	"testing"

	"github.com/sqscope/sqscope/analyzer/streamtest"
	"github.com/sqscope/sqscope/ibv"
)

func TestRecvDiagnoses(t *testing.T) { checkDiagnoses(t, streamtest.RecvDiagnoses) }

func TestRecvEvidence(t *testing.T) {
	s := streamtest.New()
	s.Pair(4)
	s.Send(1, 4, 0, 2)
	s.RecvDone(2, 4)
	s.Poll(1, 1, 3)
	s.Send(1, 8, 0, 2)
	s.Post(1, s.WRs(1, 1, ibv.WRSend, 0, 1, 32, 2), ibv.ENOMEM, 0)
	snap := run(t, s, Options{BF: DefaultBF})
	if len(snap.Diagnoses) != 1 || snap.Diagnoses[0].Kind != "rq_starved" {
		t.Fatalf("diagnoses %q", diagKinds(snap))
	}
	want := map[string]uint64{"outstanding": 8, "max_send_wr": 8, "receiver_qp": 2, "recvs_posted": 4,
		"recvs_completed": 4, "max_recv_wr": 4, "receivers_empty": 1, "receivers_traced": 1}
	if got := snap.Diagnoses[0].Evidence; !maps.Equal(got, want) {
		t.Fatalf("evidence %v, want %v", got, want)
	}
	var recv QP
	for _, q := range snap.QPs {
		if q.QPNum == 2 {
			recv = q
		}
	}
	if recv.PostRecvs != 4 || recv.RecvCQEs != 4 {
		t.Fatalf("receiver post_recvs %d, recv_cqes_polled %d; want 4, 4", recv.PostRecvs, recv.RecvCQEs)
	}
}
