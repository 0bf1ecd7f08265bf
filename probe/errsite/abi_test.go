package errsite

import (
	"os"
	"regexp"
	"strconv"
	"testing"
)

// TestSendWROffsetsPinned holds the struct ibv_send_wr offsets the
// analysis names fields by to bpf/events.h, which bpf's tests hold to
// <infiniband/verbs.h>.
func TestSendWROffsetsPinned(t *testing.T) {
	h, err := os.ReadFile("../../bpf/events.h")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		define string
		got    int
	}{{"IBV_SEND_WR_NEXT", wrNext}, {"IBV_SEND_WR_SG_LIST", wrSGList}, {"IBV_SEND_WR_NUM_SGE", wrNumSGE},
		{"IBV_SEND_WR_OPCODE", wrOpcode}, {"IBV_SEND_WR_SEND_FLAGS", wrSendFlags}} {
		m := regexp.MustCompile(`#define\s+` + c.define + `\s+(\d+)`).FindSubmatch(h)
		if m == nil {
			t.Errorf("events.h defines no %s", c.define)
			continue
		}
		if want, _ := strconv.Atoi(string(m[1])); want != c.got {
			t.Errorf("%s: errsite says %d, events.h %d", c.define, c.got, want)
		}
	}
}
