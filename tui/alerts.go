package tui

import (
	"fmt"
	"time"

	"github.com/sqscope/sqscope/analyzer"
)

// diagnosisAlerts turns the snapshot into predictions shown before a
// failure: an SQ three quarters full, or an unsignaled run three quarters
// of the depth with no CQE requested.
func diagnosisAlerts(s analyzer.Snapshot) []Alert {
	var out []Alert
	at := time.Now()
	for _, q := range s.QPs {
		k := qpKey{q.PID, q.QPNum}
		if q.MaxSendWR == 0 || q.ENOMEMSQFull > 0 {
			continue
		}
		if q.Outstanding*4 >= uint64(q.MaxSendWR)*3 {
			out = append(out, Alert{At: at, QP: k, Kind: "NEAR FULL", Text: fmt.Sprintf(
				"QP %#x NEAR FULL: %d of %d WRs outstanding; poll the CQ or signal more often", q.QPNum, q.Outstanding, q.MaxSendWR)})
		}
		if !q.SigAll && q.LongestUnsignaledRun*4 >= uint64(q.MaxSendWR)*3 {
			out = append(out, Alert{At: at, QP: k, Kind: "UNSIGNALED RUN", Text: fmt.Sprintf(
				"QP %#x unsignaled run of %d WRs is %.0f%% of the depth %d: signal at least every %d WRs",
				q.QPNum, q.LongestUnsignaledRun, 100*float64(q.LongestUnsignaledRun)/float64(q.MaxSendWR), q.MaxSendWR, q.MaxSendWR/2)})
		}
	}
	return out
}
