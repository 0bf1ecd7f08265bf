package verbs

/*
#include <stdlib.h>
#include <string.h>
#include "endpoint.h"
#include "wrbuild.h"

// One send WR as Go describes it; expanded to struct ibv_send_wr with
// num_sge SGEs of len bytes each (of sq_wr_local_len's bytes: 8 for an
// atomic), cut from the endpoint's buffer.
struct go_wr {
	uint64_t wr_id;
	int opcode;
	unsigned int flags;
	int num_sge;
	uint32_t len;
};

static int go_post_send(struct sq_endpoint *ep, struct go_wr *in, int n, int *accepted)
{
	struct ibv_send_wr *wrs = calloc(n, sizeof(*wrs));
	struct ibv_sge *sges;
	struct ibv_send_wr *bad = NULL;
	int i, j, total = 0, k = 0, ret;

	for (i = 0; i < n; i++)
		total += in[i].num_sge > 0 ? in[i].num_sge : 0;
	sges = calloc(total ? total : 1, sizeof(*sges));
	if (!wrs || !sges) {
		free(wrs);
		free(sges);
		return ENOMEM + 1000;
	}
	for (i = 0; i < n; i++) {
		wrs[i].wr_id = in[i].wr_id;
		wrs[i].send_flags = in[i].flags;
		wrs[i].num_sge = in[i].num_sge;
		wrs[i].sg_list = &sges[k];
		wrs[i].next = i + 1 < n ? &wrs[i + 1] : NULL;
		for (j = 0; j < in[i].num_sge; j++, k++) {
			sges[k].addr = (uintptr_t)ep->buf;
			sges[k].length = sq_wr_local_len(in[i].opcode, in[i].len);
			sges[k].lkey = ep->lkey;
		}
		sq_wr_fill(ep, &wrs[i], in[i].opcode);
	}
	ret = ibv_post_send(ep->qp, wrs, &bad);
	*accepted = ret ? (int)(bad - wrs) : n;
	free(wrs);
	free(sges);
	return ret;
}

static int go_post_wr(struct sq_endpoint *ep, struct go_wr *in, int n, int abort_batch)
{
	struct ibv_qp_ex *qpx = ep->qpx;
	uint32_t len;
	int i;

	if (!qpx)
		return EOPNOTSUPP + 1000;
	ibv_wr_start(qpx);
	for (i = 0; i < n; i++) {
		qpx->wr_id = in[i].wr_id;
		qpx->wr_flags = in[i].flags;
		len = sq_wr_local_len(in[i].opcode, in[i].len);
		if (sq_wr_begin(ep, in[i].opcode))
			continue; // a whole WQE: no data to set
		if (ep->ah)
			ibv_wr_set_ud_addr(qpx, ep->ah, ep->remote_qpn, ep->remote_qkey);
		if (in[i].flags & IBV_SEND_INLINE) {
			ibv_wr_set_inline_data(qpx, ep->buf, len);
		} else if (in[i].num_sge == 1) {
			ibv_wr_set_sge(qpx, ep->lkey, (uintptr_t)ep->buf, len);
		} else if (in[i].num_sge > 1) {
			struct ibv_sge sg[64];
			int j, m = in[i].num_sge > 64 ? 64 : in[i].num_sge;
			for (j = 0; j < m; j++) {
				sg[j].addr = (uintptr_t)ep->buf;
				sg[j].length = len;
				sg[j].lkey = ep->lkey;
			}
			ibv_wr_set_sge_list(qpx, in[i].num_sge, sg);
		}
	}
	if (abort_batch) {
		ibv_wr_abort(qpx);
		return 0;
	}
	return ibv_wr_complete(qpx);
}

static int go_poll(struct sq_endpoint *ep, struct ibv_wc *wc, int n)
{
	return ibv_poll_cq(ep->cq, n, wc);
}

// go_poll_ex is one extended poll session of up to n completions; it
// returns how many, or -errno.
static int go_poll_ex(struct sq_endpoint *ep, struct ibv_wc *wc, int n)
{
	struct ibv_poll_cq_attr attr = { 0 };
	int got = 0, ret;

	if (!ep->cqx)
		return -EOPNOTSUPP;
	ret = ibv_start_poll(ep->cqx, &attr);
	if (ret)
		return ret == ENOENT ? 0 : -ret;
	do {
		memset(&wc[got], 0, sizeof(wc[got]));
		wc[got].wr_id = ep->cqx->wr_id;
		wc[got].status = ep->cqx->status;
		wc[got].opcode = ibv_wc_read_opcode(ep->cqx);
		wc[got].qp_num = ibv_wc_read_qp_num(ep->cqx);
		wc[got].byte_len = ibv_wc_read_byte_len(ep->cqx);
		got++;
	} while (got < n && ibv_next_poll(ep->cqx) == 0);
	ibv_end_poll(ep->cqx);
	return got;
}
*/
import "C"

import (
	"errors"
	"fmt"
	"syscall"
	"unsafe"

	"github.com/sqscope/sqscope/ibv"
)

// SendWR describes one send work request for PostSend and PostWR: NumSGE
// scatter/gather entries of Len bytes each from the endpoint's buffer (an
// atomic's of 8 bytes, whatever Len says: verbs/wrbuild.h is the rule).
type SendWR struct {
	ID     uint64
	Opcode int // OpSend, OpRDMAWrite, ...
	Flags  uint32
	NumSGE int
	Len    uint32
}

// WC is a work completion.
type WC struct {
	ID      uint64
	Status  int
	Opcode  int
	ByteLen uint32
	QPNum   uint32
}

// WCStatusFlushErr is IBV_WC_WR_FLUSH_ERR.
const WCStatusFlushErr = ibv.WCWRFlushErr

func toC(wrs []SendWR) []C.struct_go_wr {
	in := make([]C.struct_go_wr, len(wrs))
	for i, w := range wrs {
		in[i] = C.struct_go_wr{wr_id: C.uint64_t(w.ID), opcode: C.int(w.Opcode), flags: C.uint(w.Flags),
			num_sge: C.int(w.NumSGE), len: C.uint32_t(w.Len)}
	}
	return in
}

func checkLens(e *Endpoint, wrs []SendWR) error {
	for _, w := range wrs {
		if uint64(w.Len) > uint64(e.c.buf_len) {
			return fmt.Errorf("WR of %d B does not fit the %d B buffer", w.Len, uint64(e.c.buf_len))
		}
		if w.NumSGE < 0 || w.NumSGE > 64 {
			return fmt.Errorf("num_sge %d out of range 0..64", w.NumSGE)
		}
	}
	return nil
}

// PostSend posts the WRs as one list through ibv_post_send. It returns how
// many were accepted (the index of *bad_wr) and the errno, if any.
func PostSend(e *Endpoint, wrs []SendWR) (int, error) {
	if len(wrs) == 0 {
		return 0, errors.New("empty WR list")
	}
	if err := checkLens(e, wrs); err != nil {
		return 0, err
	}
	in := toC(wrs)
	var acc C.int
	rc := C.go_post_send(e.c, &in[0], C.int(len(in)), &acc)
	if rc != 0 {
		return int(acc), syscall.Errno(rc)
	}
	return int(acc), nil
}

// PostWR posts the WRs as one ibv_wr_start..ibv_wr_complete batch (or
// ibv_wr_abort when abort is set). All or none are posted.
func PostWR(e *Endpoint, wrs []SendWR, abort bool) error {
	if e.c.qpx == nil {
		return errors.New("QP was not created for the ibv_wr_* API")
	}
	if len(wrs) == 0 {
		return errors.New("empty WR batch")
	}
	if err := checkLens(e, wrs); err != nil {
		return err
	}
	in := toC(wrs)
	rc := C.go_post_wr(e.c, &in[0], C.int(len(in)), simFlag(abort))
	if rc != 0 {
		return syscall.Errno(rc)
	}
	return nil
}

// PollCQ polls the endpoint's send CQ for up to n completions.
func PollCQ(e *Endpoint, n int) ([]WC, error) { return poll(e, n, false) }

// PollCQEx is PollCQ through one extended poll session (ibv_start_poll,
// ibv_next_poll, ibv_end_poll) on a CQ created with QPConfig.CQEx.
func PollCQEx(e *Endpoint, n int) ([]WC, error) { return poll(e, n, true) }

func poll(e *Endpoint, n int, ex bool) ([]WC, error) {
	if n <= 0 {
		return nil, errors.New("poll batch must be positive")
	}
	wc := make([]C.struct_ibv_wc, n)
	var got C.int
	if ex {
		got = C.go_poll_ex(e.c, (*C.struct_ibv_wc)(unsafe.Pointer(&wc[0])), C.int(n))
	} else {
		got = C.go_poll(e.c, (*C.struct_ibv_wc)(unsafe.Pointer(&wc[0])), C.int(n))
	}
	if got < 0 {
		return nil, fmt.Errorf("polling CQ: %w", syscall.Errno(-got))
	}
	out := make([]WC, got)
	for i := range out {
		out[i] = WC{ID: uint64(wc[i].wr_id), Status: int(wc[i].status), Opcode: int(wc[i].opcode),
			ByteLen: uint32(wc[i].byte_len), QPNum: uint32(wc[i].qp_num)}
	}
	return out, nil
}
