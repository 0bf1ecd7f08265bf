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
};

/* An endpoint and what it owns beyond the fields the traffic loop reads. */
struct sqd_endpoint {
	struct sq_endpoint ep;     /* first: the Go side hands out &ep */
	struct ibv_pd *pd;
	struct ibv_mr *mr;         /* ep.buf */
	struct ibv_mr *rmr;        /* ep.rbuf: the peer's receive and RDMA target */
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
void sqd_close(struct sqd_device *d);

/* Copies the port's valid GID table entries into out; returns how many. */
int sqd_gid_table(struct sqd_device *d, struct ibv_gid_entry *out, int max);
/* Makes GID index the one endpoints address each other with. */
int sqd_use_gid(struct sqd_device *d, int index, struct sqd_err *err);

struct sqd_endpoint *sqd_endpoint_create(struct sqd_device *d,
					 const struct sqd_qp_config *cfg,
					 struct sqd_err *err);
/* Moves the sending QP to IBV_QPS_ERR; returns 0 or an errno. */
int sqd_endpoint_set_error(struct sqd_endpoint *e);
void sqd_endpoint_destroy(struct sqd_endpoint *e);

#endif
