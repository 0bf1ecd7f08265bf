//go:build ignore

/* sqscope's uprobes on the verbs control and data path.
 *
 * Control path (create/modify/destroy QP, qp_to_qp_ex, alloc_pd,
 * open_device; create/modify/resize/destroy CQ): one sq_qp_rec or sq_cq_rec
 * per call, carrying the data-path function pointers the call revealed so
 * user space can attach to them. Data path (post_send, poll_cq, post_recv,
 * post_srq_recv, the ibv_wr_* batch, the ibv_start_poll..ibv_end_poll
 * session): one record per call or batch or session, or, in the counters
 * mode, per-QP and per-CQ totals kept here and no records at all.
 *
 * User memory is read at the ABI offsets of events.h. Every loop over it is
 * bounded; what lies past a bound is counted and reported, never dropped
 * silently.
 *
 * The programs share maps and per-thread state, so they are one object
 * (one bpf2go API, LoadVerbs). The headers below hold its parts by role,
 * each included after what it uses:
 *
 *   qpn_cache.bpf.h  a thread's cache of QP numbers
 *   maps.bpf.h       knobs set before load, maps, the per-thread state
 *   output.bpf.h     record sizes and headers, ring-buffer output
 *   user_mem.bpf.h   user-memory reads and windows, hand-copied verbs structs
 *   thread.bpf.h     the calling thread's state, a call's entry and return
 *   objects.bpf.h    which QP, CQ or SRQ lives at an address: generations
 *   send_walk.bpf.h  the walk over a post_send WR list
 *   occupancy.bpf.h  the counters mode's send-queue model
 *   counters.bpf.h   the counters mode's per-QP totals
 *   control.bpf.h    create/modify/destroy QP, qp_to_qp_ex, alloc_pd
 *   post_send.bpf.h  ibv_post_send
 *   poll_cq.bpf.h    ibv_poll_cq
 *   poll_cq_ex.bpf.h ibv_start_poll, ibv_next_poll, ibv_end_poll
 *   post_recv.bpf.h  ibv_post_recv, ibv_post_srq_recv
 *   wr_api.bpf.h     the ibv_wr_* batch
 *   lifecycle.bpf.h  a CQ's birth (cq_born), create/destroy SRQ
 *   cq_control.bpf.h create (and create_ex)/modify/resize/destroy CQ, open_device
 *   exit.bpf.h       process exit; at the cut, posts in flight and the hand-over
 *   follow.bpf.h     processes joining: fork and exec (follow mode), first call
 *   sentinel.bpf.h   the error-site probe of the sentinel mode
 */
#include <linux/bpf.h>
#include <linux/ptrace.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "events.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

#define SIGSTOP 19
#define ENOMEM 12
#define EINVAL 22

#include "qpn_cache.bpf.h"
#include "maps.bpf.h"
#include "output.bpf.h"
#include "user_mem.bpf.h"
#include "thread.bpf.h"
#include "objects.bpf.h"
#include "send_walk.bpf.h"
#include "occupancy.bpf.h"
#include "counters.bpf.h"
#include "control.bpf.h"
#include "post_send.bpf.h"
#include "poll_cq.bpf.h"
#include "poll_cq_ex.bpf.h"
#include "post_recv.bpf.h"
#include "wr_api.bpf.h"
#include "lifecycle.bpf.h"
#include "cq_control.bpf.h"
#include "exit.bpf.h"
#include "follow.bpf.h"
#include "sentinel.bpf.h"
