// A provider's data path in miniature, built by errsite's tests into a
// shared library: the checks rdma-core's providers make before a post
// (opcode, queue full, SGE count, inline size), each failure returning
// its errno, and a healthy path that returns 0. The analysis must find
// a site for each failure and none a healthy call runs.
#include <errno.h>
#include <infiniband/verbs.h>
#include <string.h>
#include <unistd.h>

struct fake_qp {
	struct ibv_qp_ex qpx; /* first, as the providers keep it */
	unsigned head, tail, max_post;
	int max_gs, max_inline, err, fd;
	unsigned nreq_done;
	char ring[64][64];
};

/* Opaque to the compiler: calls it must keep registers across. */
__attribute__((noinline)) void fake_doorbell(struct fake_qp *q, int n)
{
	__asm__ volatile("" ::"r"(q), "r"(n) : "memory");
	q->nreq_done += n;
}

__attribute__((noinline)) void fake_log(const char *what)
{
	__asm__ volatile("" ::"r"(what) : "memory");
}

/* mlx5's shape: each failure sets err and leaves the loop; the doorbell
 * for the WRs already written rings at the end. */
int fake_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr)
{
	struct fake_qp *q = (struct fake_qp *)ibqp;
	int err = 0, nreq;

	for (nreq = 0; wr; ++nreq, wr = wr->next) {
		if ((unsigned)wr->opcode > IBV_WR_DRIVER1) {
			fake_log("bad opcode");
			err = EINVAL;
			*bad_wr = wr;
			goto out;
		}
		if (q->head - q->tail + nreq >= q->max_post) {
			fake_log("queue full");
			err = ENOMEM;
			*bad_wr = wr;
			goto out;
		}
		if (wr->num_sge > q->max_gs) {
			err = ENOMEM;
			*bad_wr = wr;
			goto out;
		}
		if (wr->send_flags & IBV_SEND_INLINE) {
			int len = 0;
			for (int i = 0; i < wr->num_sge; i++) {
				len += wr->sg_list[i].length;
				if (len > q->max_inline) {
					fake_log("inline too big");
					err = ENOMEM;
					*bad_wr = wr;
					goto out;
				}
			}
		}
		memcpy(q->ring[(q->head + nreq) & 63], &wr->wr_id, sizeof(wr->wr_id));
	}
out:
	q->head += nreq;
	if (nreq)
		fake_doorbell(q, nreq);
	return err;
}

/* rxe's shape: the doorbell is a write() after the loop, whose failure
 * replaces the WR's error. */
int fake_post_send_db(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr)
{
	struct fake_qp *q = (struct fake_qp *)ibqp;
	int rc = 0, err;

	if (!bad_wr || !wr)
		return EINVAL;
	for (; wr; wr = wr->next) {
		if (((q->head + 1) & 63) == (q->tail & 63)) {
			rc = ENOMEM;
			*bad_wr = wr;
			break;
		}
		q->head++;
	}
	err = write(q->fd, "", 0) < 0 ? errno : 0;
	return err ? err : rc;
}

/* An errno written first and cleared on success: the write runs on
 * healthy calls too, so it is no site. */
int fake_post_send_hoisted(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr)
{
	struct fake_qp *q = (struct fake_qp *)ibqp;
	volatile int err = ENOMEM;

	if (q->head - q->tail < q->max_post) {
		q->head++;
		err = 0;
	} else {
		*bad_wr = wr;
	}
	fake_doorbell(q, 1);
	return err;
}

/* wr_complete's shape: the error a builder recorded in the QP. */
int fake_wr_complete(struct ibv_qp_ex *qpx)
{
	struct fake_qp *q = (struct fake_qp *)qpx;
	int err = q->err;

	if (err) {
		q->head = q->tail;
		fake_doorbell(q, 0);
		return err;
	}
	fake_doorbell(q, 1);
	return 0;
}
