package workload

import (
	"fmt"
	"strings"
)

// DemoArgs are the workload flags of `sqscope demo`'s scripted scenario:
// four healthy QPs posting inline with a CQE every 16th WR for seconds;
// after faultAfter seconds QP index 2 stops signaling, so its SQ fills and
// every post fails with ENOMEM.
func DemoArgs(seconds, faultAfter float64) []string {
	return strings.Fields(fmt.Sprintf("--qps 4 -s 64 -I 64 -Q 16 -t 128 --rate 4000 -D %g --fault never-signal --fault-after %g --fault-qp 2",
		seconds, faultAfter))
}
