#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "loop.h"
#include "../verbs/wrbuild.h"

#define MAX_LIST 4096
#define MAX_SGE 64
#define MAX_POLL 4096

static volatile int stop_requested;

void wl_request_stop(void) { stop_requested = 1; }
void wl_reset_stop(void) { stop_requested = 0; }

uint64_t wl_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* thread_cpu_ns is the calling thread's CPU time: what the run cost its
 * thread, probes included, however busy the other CPUs are. */
static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Keep the peer's receive queue full for SEND on a connection; a starved
 * receiver (starve) reaps its completions but posts no new receive. */
static void replenish(struct sq_endpoint *ep, struct wl_result *r, int starve)
{
	struct ibv_wc wc[64];
	int n, i;

	if (!ep->peer_rcq)
		return;
	n = ibv_poll_cq(ep->peer_rcq, 64, wc);
	for (i = 0; i < n; i++) {
		struct ibv_sge sge;
		struct ibv_recv_wr wr, *bad;
		uint64_t slot = wc[i].wr_id % (ep->rq_depth ? ep->rq_depth : 1);

		r->recv_cqes++;
		if (wc[i].status != IBV_WC_SUCCESS || starve)
			continue;
		memset(&wr, 0, sizeof(wr));
		sge.addr = (uintptr_t)ep->rbuf + slot * ep->recv_size;
		sge.length = ep->recv_size;
		sge.lkey = ep->rlkey;
		wr.wr_id = wc[i].wr_id;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		if (ep->peer_srq ? ibv_post_srq_recv(ep->peer_srq, &wr, &bad) == 0 :
				   ibv_post_recv(ep->peer_qp, &wr, &bad) == 0)
			r->recvs_posted++;
	}
}

/* A thread's QPs: each lane is one QP with its parameters, results and
 * state; the thread posts to its lanes in turn, and polls after each post
 * the lane's CQ, which may be one CQ shared by every lane (the CQEs then
 * go to their lane by the lane index in the high bits of their wr_id, as
 * applications name a WR's context by its wr_id). */
#define LANE_SHIFT 40
#define SEQ_MASK ((1ull << LANE_SHIFT) - 1)

struct state {
	uint64_t retired;        /* WRs the application knows are done */
	uint64_t last_signaled;  /* wr_id + 1 of the last signaled WR posted */
	/* The signaled WRs posted and not yet completed, oldest first: their
	 * wr_id, the WRs posted up to them and when they were posted. WR ids
	 * count the WRs a failed post dropped too, so only this says how many
	 * posted WRs a CQE retires. A ring of sig_mask + 1 slots that doubles
	 * when full: a provider may hold more WRs than the max_send_wr it
	 * reports (rxe frees a slot when its WR completes, not when its CQE
	 * is polled), and a ring that wrapped would retire WRs it never saw. */
	uint64_t *sig_id, *sig_wrs, *sig_t0, sig_head, sig_tail, sig_mask;
	uint64_t retired_wrs;    /* posted WRs retired */
};

struct lane {
	struct sq_endpoint *ep;
	const struct wl_params *p;
	struct wl_result *r;
	struct state st;
	uint64_t tag;            /* lane index << LANE_SHIFT: in every wr_id */
	int fault;               /* the fault active now */
	int timed, done;
	uint64_t deadline, held_since, last_now;
	uint64_t wait_until;     /* rate cap: nothing due before this */
	uint64_t cpu_start;      /* the thread's CPU time at start_ns */
};

struct group {
	struct lane *lanes;
	int n;
	int shared_cq;           /* every lane's send CQ is the same CQ */
	struct ibv_wc *wc;
	int err;                 /* an errno that stopped the run */
};

static int sig_alloc(struct state *st, uint64_t slots)
{
	st->sig_id = calloc(slots, sizeof(*st->sig_id));
	st->sig_wrs = calloc(slots, sizeof(*st->sig_wrs));
	st->sig_t0 = calloc(slots, sizeof(*st->sig_t0));
	st->sig_mask = slots - 1;
	return st->sig_id && st->sig_wrs && st->sig_t0 ? 0 : ENOMEM;
}

static void sig_free(struct state *st)
{
	free(st->sig_id);
	free(st->sig_wrs);
	free(st->sig_t0);
}

/* sig_push notes a signaled WR posted: its wr_id, the WRs posted up to it
 * and its post time; the ring doubles rather than wraps. */
static int sig_push(struct state *st, uint64_t id, uint64_t wrs, uint64_t t0)
{
	uint64_t i, m;

	if (st->sig_head - st->sig_tail > st->sig_mask) {
		struct state grown = *st;

		if (sig_alloc(&grown, 2 * (st->sig_mask + 1))) {
			sig_free(&grown);
			return ENOMEM;
		}
		for (i = st->sig_tail; i != st->sig_head; i++) {
			grown.sig_id[i & grown.sig_mask] = st->sig_id[i & st->sig_mask];
			grown.sig_wrs[i & grown.sig_mask] = st->sig_wrs[i & st->sig_mask];
			grown.sig_t0[i & grown.sig_mask] = st->sig_t0[i & st->sig_mask];
		}
		sig_free(st);
		*st = grown;
	}
	m = st->sig_head & st->sig_mask;
	st->sig_id[m] = id;
	st->sig_wrs[m] = wrs;
	st->sig_t0[m] = t0;
	st->sig_head++;
	return 0;
}

/* retire notes a CQE for wr_id: it retires its WR and every one before.
 * It returns when its WR was posted, 0 when it is not a signaled WR
 * outstanding (an unsignaled one flushed with an error). */
static uint64_t retire(struct state *st, uint64_t wr_id)
{
	uint64_t t0 = 0;

	while (st->sig_tail != st->sig_head && st->sig_id[st->sig_tail & st->sig_mask] <= wr_id) {
		uint64_t m = st->sig_tail & st->sig_mask;

		st->retired_wrs = st->sig_wrs[m];
		t0 = st->sig_id[m] == wr_id ? st->sig_t0[m] : 0;
		st->sig_tail++;
	}
	return t0;
}

/* poll_ex is ibv_poll_cq through one extended poll session: up to max
 * completions (ibv_next_poll only while fewer), of which the loop reads
 * what the ibv_cq_ex holds; mode (SQ_CQX_*) says how the session ends. */
static int poll_ex(struct ibv_cq_ex *cq, int max, int mode, struct ibv_wc *wc)
{
	struct ibv_poll_cq_attr attr = { 0 };
	int n = 0, ret;

	if (mode == SQ_CQX_ONE)
		max = 1;
	ret = ibv_start_poll(cq, &attr);
	if (ret)
		return ret == ENOENT ? 0 : -ret;
	for (;;) {
		wc[n].wr_id = cq->wr_id;
		wc[n].status = cq->status;
		if (++n == max)
			break;
		ret = ibv_next_poll(cq);
		if (ret == ENOENT && mode == SQ_CQX_NEXT_ENDS)
			return n; /* the provider ended the session */
		if (ret)
			break;
	}
	ibv_end_poll(cq);
	return n;
}

/* poll_once polls lane l's CQ once (the group's, when shared) and gives
 * each completion to its lane; the poll itself is counted on l. */
static int poll_once(struct group *g, struct lane *l)
{
	struct sq_endpoint *ep = l->ep;
	const struct wl_params *p = l->p;
	struct ibv_wc *wc = g->wc;
	int n, i, starve = l->fault == WL_FAULT_RQ_STARVE;
	uint64_t now = 0;

	if (ep->cqx)
		n = poll_ex(ep->cqx, (int)p->poll_batch, ep->cqx_mode, wc);
	else
		n = ibv_poll_cq(ep->cq, p->poll_batch, wc);
	l->r->polls++;
	if (n <= 0) {
		if (n == 0)
			l->r->empty_polls++;
		replenish(ep, l->r, starve);
		return n;
	}
	now = wl_now_ns();
	for (i = 0; i < n; i++) {
		uint64_t li = wc[i].wr_id >> LANE_SHIFT;
		struct lane *o = l;
		struct wl_result *r;
		struct state *st;
		uint64_t t0;

		if (g->shared_cq && li < (uint64_t)g->n)
			o = &g->lanes[li];
		r = o->r;
		st = &o->st;
		wc[i].wr_id &= SEQ_MASK;
		r->cqes++;
		if (wc[i].status != IBV_WC_SUCCESS)
			r->cqe_errors++;
		/* RC completes in order: a CQE retires its WR and all before it */
		if (wc[i].wr_id + 1 > st->retired)
			st->retired = wc[i].wr_id + 1;
		t0 = retire(st, wc[i].wr_id);
		if (t0 && wc[i].status == IBV_WC_SUCCESS) {
			uint64_t d = now - t0;

			r->lat_sum_ns += d;
			r->lat_n++;
			if (d > r->lat_max_ns)
				r->lat_max_ns = d;
		}
	}
	replenish(ep, l->r, starve);
	return n;
}

static int carries_payload(int opcode)
{
	switch (opcode) {
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM:
	case IBV_WR_SEND_WITH_INV:
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		return 1;
	}
	return 0;
}

/* opcode_of is WR id's opcode: the params' opcodes in turn. */
static int opcode_of(const struct wl_params *p, uint64_t id)
{
	return p->opcodes[id % p->n_opcodes];
}

static int post_batch(struct sq_endpoint *ep, const struct wl_params *p, uint32_t num_sge,
		      int api_wr, uint64_t tag, uint64_t first, uint32_t k, const unsigned int *flags,
		      uint32_t size, int bad_opcode, uint32_t *accepted)
{
	uint32_t i;
	int ret;

	if (api_wr) {
		struct ibv_qp_ex *qpx = ep->qpx;

		ibv_wr_start(qpx);
		for (i = 0; i < k; i++) {
			int opcode = bad_opcode ? bad_opcode : opcode_of(p, first + i);
			uint32_t len = sq_wr_local_len(opcode, size);

			qpx->wr_id = tag | (first + i);
			/* rxe reads IBV_SEND_INLINE from wr_flags; mlx5 ignores it there */
			qpx->wr_flags = flags[i];
			if (sq_wr_begin(ep, opcode))
				continue;
			if (ep->ah)
				ibv_wr_set_ud_addr(qpx, ep->ah, ep->remote_qpn, ep->remote_qkey);
			if (flags[i] & IBV_SEND_INLINE) {
				ibv_wr_set_inline_data(qpx, ep->buf, len);
			} else if (num_sge <= 1) {
				ibv_wr_set_sge(qpx, ep->lkey, (uintptr_t)ep->buf, len);
			} else {
				struct ibv_sge sg[MAX_SGE];
				uint32_t j, per = len / num_sge;

				for (j = 0; j < num_sge && j < MAX_SGE; j++) {
					sg[j].addr = (uintptr_t)ep->buf + j * per;
					sg[j].length = j + 1 == num_sge ? len - per * j : per;
					sg[j].lkey = ep->lkey;
				}
				ibv_wr_set_sge_list(qpx, num_sge, sg);
			}
		}
		ret = ibv_wr_complete(qpx);
		*accepted = ret ? 0 : k;
		return ret;
	} else {
		static __thread struct ibv_send_wr wrs[MAX_LIST];
		static __thread struct ibv_sge sges[MAX_LIST][4];
		struct ibv_sge bigsg[MAX_SGE];
		struct ibv_send_wr *bad = NULL;

		for (i = 0; i < k; i++) {
			struct ibv_send_wr *w = &wrs[i];
			int opcode = bad_opcode ? bad_opcode : opcode_of(p, first + i);
			uint32_t len = sq_wr_local_len(opcode, size), j, n = num_sge ? num_sge : 1, per;
			struct ibv_sge *sg = sges[i];

			if (opcode == IBV_WR_LOCAL_INV || opcode == IBV_WR_BIND_MW)
				n = 0; /* no data: the WQE is the memory-key operation */
			per = n ? len / n : 0;

			if (n > 4) {
				/* only the too-many-sge fault uses this; one WR per list */
				sg = bigsg;
				if (n > MAX_SGE)
					n = MAX_SGE;
			}
			memset(w, 0, sizeof(*w));
			w->wr_id = tag | (first + i);
			w->send_flags = flags[i];
			w->sg_list = sg;
			w->num_sge = (int)n;
			w->next = i + 1 < k ? &wrs[i + 1] : NULL;
			for (j = 0; j < n; j++) {
				sg[j].addr = (uintptr_t)ep->buf + j * per;
				sg[j].length = j + 1 == n ? len - per * j : per;
				sg[j].lkey = ep->lkey;
			}
			sq_wr_fill(ep, w, opcode);
		}
		if (p->direct_post)
			ret = p->direct_post(ep->qp, wrs, &bad);
		else
			ret = ibv_post_send(ep->qp, wrs, &bad);
		*accepted = ret ? (uint32_t)(bad - wrs) : k;
		return ret;
	}
}

/* lane_step posts the lane's next call (or waits on its own limits) and
 * polls after it, as a perftest loop does; 1 when the lane is done. */
static int lane_step(struct group *g, struct lane *l)
{
	static __thread unsigned int flags[MAX_LIST];
	const struct wl_params *p = l->p;
	struct wl_result *r = l->r;
	struct state *st = &l->st;
	uint64_t remaining, out;
	uint32_t k, i, acc = 0;
	uint64_t t0, t1;
	int ret, bad_opcode = 0, use_inline = p->use_inline;
	uint32_t len = p->size, num_sge = p->num_sge;

	if (p->fault && l->fault == WL_FAULT_NONE && l->last_now - r->start_ns >= p->fault_after_ns) {
		l->fault = p->fault;
		r->fault_start_ns = l->last_now;
		r->fault_attempt = r->attempts;
	}
	if (l->fault) {
		len = p->f_size;
		use_inline = p->f_inline;
		num_sge = p->f_num_sge;
		if (l->fault == WL_FAULT_BAD_OPCODE)
			bad_opcode = 0x7f;
	}

	if (l->timed) {
		l->last_now = wl_now_ns();
		if (l->last_now >= l->deadline)
			return 1;
		remaining = p->post_list;
	} else {
		if (r->attempts >= p->iters)
			return 1;
		remaining = p->iters - r->attempts;
	}
	k = remaining < p->post_list ? (uint32_t)remaining : p->post_list;

	/* The application's own flow control: never more than tx_depth
	 * outstanding. Fault modes that overflow the SQ skip it, as the
	 * buggy applications they reproduce do. */
	if (p->tx_depth && l->fault != WL_FAULT_NEVER_SIGNAL && l->fault != WL_FAULT_LAZY_POLL &&
	    l->fault != WL_FAULT_RQ_STARVE) {
		out = r->wrs - st->retired_wrs;
		if (out + k > p->tx_depth) {
			uint64_t now;

			/* None of them signaled (a failed list dropped its
			 * signaled WR): no CQE will ever make room, as an
			 * application waiting here hangs. */
			if (st->retired >= st->last_signaled) {
				r->stalled_unsignaled = out;
				r->stalled = 1;
				return 1;
			}
			if (poll_once(g, l) > 0 || !l->held_since) {
				l->held_since = wl_now_ns();
				return 0;
			}
			/* completions stopped coming (an overrun CQ writes no
			 * more): give up as the drain does */
			now = wl_now_ns();
			l->last_now = now;
			if (now - l->held_since > p->drain_ns) {
				r->stalled = 1;
				return 1;
			}
			return 0;
		}
		l->held_since = 0;
	}
	if (p->rate) {
		uint64_t due = r->start_ns + r->attempts * 1000000000ull / p->rate;
		uint64_t now = wl_now_ns();

		l->last_now = now;
		if (due > now) {
			l->wait_until = due;
			return 0;
		}
	}
	for (i = 0; i < k; i++) {
		uint64_t id = r->attempts + i;
		unsigned int f = 0;

		/* only what sends its payload may send it inline */
		if (use_inline && (bad_opcode || carries_payload(opcode_of(p, id))))
			f |= IBV_SEND_INLINE;
		if (l->fault != WL_FAULT_NEVER_SIGNAL &&
		    ((id + 1) % p->cq_mod == 0 || (!l->timed && id + 1 == p->iters)))
			f |= IBV_SEND_SIGNALED;
		flags[i] = f;
	}
	/* in a timed run the last batch before the deadline is signaled */
	if (l->timed && l->fault != WL_FAULT_NEVER_SIGNAL && wl_now_ns() + 1000 >= l->deadline)
		flags[k - 1] |= IBV_SEND_SIGNALED;

	t0 = wl_now_ns();
	ret = post_batch(l->ep, p, num_sge, p->api_wr, l->tag, r->attempts, k, flags, len, bad_opcode, &acc);
	t1 = wl_now_ns();
	l->last_now = t1;
	r->post_ns += t1 - t0;
	r->post_calls++;
	if (acc) {
		r->doorbells++;
		for (i = 0; i < acc; i++) {
			if (flags[i] & IBV_SEND_INLINE)
				r->inline_wrs++;
			if (flags[i] & IBV_SEND_SIGNALED) {
				r->signaled++;
				st->last_signaled = r->attempts + i + 1;
				if (sig_push(st, r->attempts + i, r->wrs + i + 1, t1)) {
					g->err = ENOMEM;
					return 1;
				}
			}
		}
		r->wrs += acc;
	}
	if (ret) {
		if (!r->first_errno) {
			r->first_errno = ret;
			r->first_error_at = r->attempts + acc;
		}
		if (ret == ENOMEM)
			r->enomem++;
		else if (ret == EINVAL)
			r->einval++;
		else
			r->other_errors++;
	}
	/* WRs of a failed list past *bad_wr are dropped, not retried */
	r->attempts += k;
	out = r->wrs - st->retired_wrs;
	if (out > r->peak_outstanding)
		r->peak_outstanding = out;

	if (l->fault == WL_FAULT_LAZY_POLL && p->lazy_poll > 1) {
		if (r->post_calls % p->lazy_poll == 0)
			poll_once(g, l);
	} else if (l->fault == WL_FAULT_CQ_OVERRUN) {
		/* reaped only when the flow control above holds */
	} else {
		poll_once(g, l);
	}
	return 0;
}

static int lane_init(struct lane *l, struct sq_endpoint *ep, const struct wl_params *p,
		     struct wl_result *r, uint64_t tag)
{
	if (p->n_opcodes == 0 || p->n_opcodes > sizeof(p->opcodes) / sizeof(p->opcodes[0]) ||
	    p->post_list == 0 || p->post_list > MAX_LIST || p->poll_batch == 0 ||
	    p->poll_batch > MAX_POLL || p->cq_mod == 0 || p->num_sge > MAX_SGE ||
	    p->f_num_sge > MAX_SGE || p->sig_slots == 0 || (p->sig_slots & (p->sig_slots - 1)))
		return EINVAL;
	if (p->api_wr && !ep->qpx)
		return EOPNOTSUPP;
	memset(l, 0, sizeof(*l));
	l->ep = ep;
	l->p = p;
	l->r = r;
	l->tag = tag;
	if (sig_alloc(&l->st, p->sig_slots))
		return ENOMEM;
	memset(r, 0, sizeof(*r));
	l->timed = p->duration_ns != 0;
	return 0;
}

static void lane_start(struct lane *l)
{
	l->cpu_start = thread_cpu_ns();
	l->r->start_ns = wl_now_ns();
	l->last_now = l->r->start_ns;
	if (l->timed)
		l->deadline = l->r->start_ns + l->p->duration_ns;
}

static int undrained(const struct lane *l)
{
	return !l->r->stalled && l->st.retired < l->st.last_signaled;
}

/* drain waits for the CQE of each lane's last signaled WR, up to drain_ns
 * with no completion coming. */
static void drain(struct group *g)
{
	uint64_t idle_since = wl_now_ns(), drain_ns = g->lanes[0].p->drain_ns;
	int i;

	for (;;) {
		int waiting = 0, got = 0, failed = 0;

		for (i = 0; i < g->n; i++) {
			struct lane *l = &g->lanes[i];
			int n;

			if (!undrained(l))
				continue;
			if (g->shared_cq && waiting) {
				/* one poll of the shared CQ serves every lane; the
				 * others' receivers still get their receives back */
				replenish(l->ep, l->r, l->fault == WL_FAULT_RQ_STARVE);
				continue;
			}
			waiting = 1;
			n = poll_once(g, l);
			if (n > 0)
				got = 1;
			else if (n < 0)
				failed = 1;
		}
		if (!waiting)
			break;
		if (got)
			idle_since = wl_now_ns();
		else if (failed || wl_now_ns() - idle_since > drain_ns)
			break;
	}
	for (i = 0; i < g->n; i++) {
		struct lane *l = &g->lanes[i];

		if (l->st.retired < l->st.last_signaled)
			l->r->undrained = l->st.last_signaled - l->st.retired;
		l->r->end_ns = wl_now_ns();
		l->r->cpu_ns = thread_cpu_ns() - l->cpu_start;
	}
}

int wl_run_group(int n, struct sq_endpoint *const *eps, const struct wl_params *ps,
		 struct wl_result *rs, int shared_cq)
{
	static __thread struct ibv_wc wc[MAX_POLL];
	struct group g = { .n = n, .shared_cq = shared_cq, .wc = wc };
	int i, ret = 0, active;

	if (n < 1 || (uint64_t)n > (1ull << (64 - LANE_SHIFT)))
		return EINVAL;
	g.lanes = calloc((size_t)n, sizeof(*g.lanes));
	if (!g.lanes)
		return ENOMEM;
	for (i = 0; i < n && !ret; i++)
		ret = lane_init(&g.lanes[i], eps[i], &ps[i], &rs[i],
				n > 1 ? (uint64_t)i << LANE_SHIFT : 0);
	if (ret)
		goto out;
	for (i = 0; i < n; i++)
		lane_start(&g.lanes[i]);
	active = n;
	while (active > 0 && !stop_requested && !g.err) {
		uint64_t wake = 0;
		int posted = 0;

		for (i = 0; i < n; i++) {
			struct lane *l = &g.lanes[i];
			uint64_t calls;

			if (l->done)
				continue;
			if (l->wait_until) {
				if (l->wait_until > wl_now_ns()) {
					if (!wake || l->wait_until < wake)
						wake = l->wait_until;
					continue;
				}
				l->wait_until = 0;
			}
			calls = l->r->post_calls;
			if (lane_step(&g, l)) {
				l->done = 1;
				active--;
			}
			posted |= l->r->post_calls != calls || l->held_since;
		}
		/* every lane waits on its rate cap: sleep until the first is due */
		if (!posted && wake) {
			uint64_t now = wl_now_ns();

			if (wake > now + 50000) {
				struct timespec ts = { (time_t)((wake - now) / 1000000000ull),
						       (long)((wake - now) % 1000000000ull) };
				nanosleep(&ts, NULL);
			}
		}
	}
	drain(&g);
	ret = g.err;
out:
	for (i = 0; i < n; i++)
		sig_free(&g.lanes[i].st);
	free(g.lanes);
	return ret;
}
