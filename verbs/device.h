/* The libibverbs device backend: opens a real verbs device (rxe, mlx5, ...)
 * and builds endpoints on it, each a sending QP connected to a peer QP on the
 * same port so that its traffic has somewhere to land. */
#ifndef SQSCOPE_DEVICE_H
#define SQSCOPE_DEVICE_H

#include "endpoint.h"

#define SQD_MSG_LEN 192
#define SQD_UD_QKEY 0x11111111u
#define SQD_GRH_LEN 40 /* a UD receive starts with the GRH slot */

/* Why a call failed: what was being done and the errno it left. */
struct sqd_err {
	int errnum;                /* errno of the failed call; 0 if it set none */
	int no_wr_api;             /* the provider cannot create an ibv_wr_* QP */
	char op[SQD_MSG_LEN];      /* "creating QP" */
	char detail[SQD_MSG_LEN];  /* "RC, max_send_wr 128, ..." or "" */
};

struct sqd_device {
	struct ibv_context *ctx;
	struct ibv_device_attr dattr;
	struct ibv_port_attr pattr;
	uint8_t port;
	int roce;                  /* Ethernet link layer: address by GID, not LID */
	int gid_index;             /* -1 until sqd_use_gid */
	union ibv_gid gid;
	struct ibv_pd *shared_pd;  /* the PD of the SRQs and of the endpoints
	                            * whose peers use one; NULL until the first */
};

/* A send CQ several endpoints share (sqd_qp_config.send_cq). */
struct sqd_cq {
	struct ibv_cq *cq;
	struct ibv_cq_ex *cqx;     /* cq when created extended, else NULL */
	int cqx_mode;              /* SQ_CQX_* */
};

/* An SRQ the peers of several endpoints take their receives from
 * (sqd_qp_config.srq), the CQ those receives complete on, and its
 * registered buffer of depth slots of recv_size bytes. */
struct sqd_srq {
	struct ibv_srq *srq;
	struct ibv_cq *rcq;
	struct ibv_mr *mr;
	void *rbuf;
	size_t rbuf_len;
	uint32_t depth;            /* receives it was filled with */
	uint32_t recv_size;
};

/* What NewEndpoint asks for: QPConfig with the Go side's defaults applied. */
struct sqd_qp_config {
	int qp_type;               /* IBV_QPT_RC or IBV_QPT_UD */
	uint32_t max_send_wr;
	uint32_t max_send_sge;
	uint32_t max_inline;
	uint32_t rq_depth;         /* receives kept posted on the peer */
	int sig_all;
	int wr_api;
	uint64_t send_ops;
	size_t buf_size;
	int cq_ex;                 /* the send CQ from ibv_create_cq_ex */
	int atomics;               /* the peer takes remote atomics */
	uint32_t cq_depth;         /* entries asked for the send CQ; 0: room for every WR */
	int stop_at_rtr;           /* leave the sending QP in RTR (posts before RTS) */
	struct sqd_cq *send_cq;    /* shared send CQ, or NULL: one of its own */
	struct sqd_srq *srq;       /* the peer's SRQ (RC only), or NULL: its own RQ */
};

/* An endpoint and what it owns beyond the fields the traffic loop reads. */
struct sqd_endpoint {
	struct sq_endpoint ep;     /* first: the Go side hands out &ep */
	struct ibv_pd *pd;
	int own_pd;                /* pd is the endpoint's, not the device's shared one */
	struct ibv_mr *mr;         /* ep.buf */
	void *tbuf;                /* the peer's RDMA target, and its receive slots
	                            * (ep.rbuf) unless it takes them from an SRQ */
	size_t tbuf_len;
	struct ibv_mr *rmr;        /* tbuf */
	struct ibv_cq *own_cq;     /* ep.cq unless shared: destroyed with the endpoint */
	struct ibv_cq *own_rcq;    /* ep.peer_rcq unless the SRQ's */
	struct ibv_cq *peer_scq;
	struct ibv_qp_cap caps;    /* as the provider rewrote them */
};

/* Writes the names of the devices present, comma-separated, into buf.
 * Returns how many there are, or -errno when the list cannot be read. */
int sqd_device_names(char *buf, size_t len);

/* Opens device name and queries its attributes. Returns NULL with *found 0
 * (and err untouched) when no device has that name. */
struct sqd_device *sqd_open(const char *name, int *found, struct sqd_err *err);
/* Queries port and records it as the one endpoints are built on. */
int sqd_use_port(struct sqd_device *d, int port, struct sqd_err *err);
/* Releases the device: after every endpoint, CQ and SRQ. Returns -1 with
 * the first failure in err (when given) if a release failed, else 0. The
 * *_destroy functions below do the same, and each frees its object. */
int sqd_close(struct sqd_device *d, struct sqd_err *err);

/* Copies the port's valid GID table entries into out; returns how many. */
int sqd_gid_table(struct sqd_device *d, struct ibv_gid_entry *out, int max);
/* Makes GID index the one endpoints address each other with. */
int sqd_use_gid(struct sqd_device *d, int index, struct sqd_err *err);

struct sqd_endpoint *sqd_endpoint_create(struct sqd_device *d,
					 const struct sqd_qp_config *cfg,
					 struct sqd_err *err);
/* A send CQ of depth entries to share, extended when ex. */
struct sqd_cq *sqd_cq_create(struct sqd_device *d, uint32_t depth, int ex,
			     struct sqd_err *err);
/* After every endpoint that completes on it. */
int sqd_cq_destroy(struct sqd_cq *c, struct sqd_err *err);
/* An SRQ of depth receives of recv_size bytes, its CQ and buffer, on the
 * device's shared PD, filled. */
struct sqd_srq *sqd_srq_create(struct sqd_device *d, uint32_t depth,
			       uint32_t recv_size, struct sqd_err *err);
/* After every endpoint whose peer uses it. */
int sqd_srq_destroy(struct sqd_srq *q, struct sqd_err *err);
/* Posts depth receives to srq, slot i of rbuf as wr_id i, 64 per
 * ibv_post_srq_recv; returns 0 or the error of the call that failed. */
int sqd_fill_srq(struct ibv_srq *srq, void *rbuf, uint32_t lkey, uint32_t depth,
		 uint32_t recv_size);

/* Moves the sending QP to IBV_QPS_ERR; returns 0 or an errno. */
int sqd_endpoint_set_error(struct sqd_endpoint *e);
int sqd_endpoint_destroy(struct sqd_endpoint *e, struct sqd_err *err);

#endif
