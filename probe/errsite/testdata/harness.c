// Runs testdata/fakeprov.c's functions with a breakpoint (int3) on every
// site errsite found, as a uprobe would be placed, and prints per call
// what it returned, which sites it hit, and whether the QP was where the
// analysis said. Sites come on stdin, one a line: "VADDR KIND REG OFF
// ADJUST" (KIND 0 unknown, 1 register, 2 stack slot).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <link.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

struct fake_qp {
	struct ibv_qp_ex qpx;
	unsigned head, tail, max_post;
	int max_gs, max_inline, err, fd;
	unsigned nreq_done;
	char ring[64][64];
};

#define MAXS 64
static struct { uint8_t *at; uint8_t orig; int kind, reg; long off, adjust; } site[MAXS];
static int nsite, stepping = -1;
static int hits[MAXS], nhits, qpbad;
static void *cur_qp;

static const int greg[16] = {REG_RAX, REG_RCX, REG_RDX, REG_RBX, REG_RSP, REG_RBP, REG_RSI, REG_RDI,
			     REG_R8, REG_R9, REG_R10, REG_R11, REG_R12, REG_R13, REG_R14, REG_R15};

static void trap(int sig, siginfo_t *si, void *ctx)
{
	greg_t *g = ((ucontext_t *)ctx)->uc_mcontext.gregs;
	(void)sig, (void)si;
	if (stepping >= 0) { /* the single step after a hit: re-arm it */
		*site[stepping].at = 0xcc;
		stepping = -1;
		g[REG_EFL] &= ~0x100;
		return;
	}
	uint8_t *pc = (uint8_t *)g[REG_RIP] - 1;
	for (int i = 0; i < nsite; i++) {
		if (site[i].at != pc)
			continue;
		if (nhits < MAXS)
			hits[nhits++] = i;
		uint64_t v = 0;
		if (site[i].kind == 1)
			v = g[greg[site[i].reg]];
		else if (site[i].kind == 2)
			v = *(uint64_t *)(g[REG_RSP] + site[i].off);
		if (site[i].kind == 0 || (void *)(v - site[i].adjust) != cur_qp)
			qpbad++;
		*pc = site[i].orig;
		g[REG_RIP] = (greg_t)pc;
		g[REG_EFL] |= 0x100;
		stepping = i;
		return;
	}
	abort();
}

typedef int (*post_fn)(struct ibv_qp *, struct ibv_send_wr *, struct ibv_send_wr **);
typedef int (*complete_fn)(struct ibv_qp_ex *);

static void report(const char *name, int ret)
{
	printf("%s %d", name, ret);
	for (int i = 0; i < nhits; i++)
		printf("%c%d", i ? ',' : ' ', hits[i]);
	printf("%s qpbad=%d\n", nhits ? "" : " -", qpbad);
	nhits = qpbad = 0;
}

static void post(const char *name, post_fn f, int opcode, int nsge, int flags, unsigned used, int nullbad)
{
	static struct fake_qp q;
	struct ibv_sge sg[4] = {{.length = 40}, {.length = 40}, {.length = 40}, {.length = 40}};
	struct ibv_send_wr wr[2], *bad = NULL;
	memset(&q, 0, sizeof(q));
	q.max_post = 16, q.max_gs = 2, q.max_inline = 64;
	q.fd = open("/dev/null", O_WRONLY);
	q.head = used;
	for (int i = 0; i < 2; i++) {
		memset(&wr[i], 0, sizeof(wr[i]));
		wr[i].wr_id = i, wr[i].next = i ? NULL : &wr[1], wr[i].sg_list = sg;
		wr[i].num_sge = nsge, wr[i].opcode = opcode, wr[i].send_flags = flags;
	}
	cur_qp = &q;
	int ret = f(&q.qpx.qp_base, wr, nullbad ? NULL : &bad);
	close(q.fd);
	report(name, ret);
}

int main(int argc, char **argv)
{
	if (argc != 2)
		return 2;
	void *h = dlopen(argv[1], RTLD_NOW);
	struct link_map *lm;
	if (!h || dlinfo(h, RTLD_DI_LINKMAP, &lm) != 0) {
		fprintf(stderr, "dlopen %s: %s\n", argv[1], dlerror());
		return 1;
	}
	unsigned long va;
	long pg = sysconf(_SC_PAGESIZE);
	while (nsite < MAXS && scanf("%lx %d %d %ld %ld", &va, &site[nsite].kind, &site[nsite].reg,
				     &site[nsite].off, &site[nsite].adjust) == 5) {
		uint8_t *at = (uint8_t *)(lm->l_addr + va);
		if (mprotect((void *)((uintptr_t)at & ~(pg - 1)), 2 * pg, PROT_READ | PROT_WRITE | PROT_EXEC) != 0) {
			perror("mprotect");
			return 1;
		}
		site[nsite].at = at, site[nsite].orig = *at;
		*at = 0xcc;
		nsite++;
	}
	struct sigaction sa = {.sa_sigaction = trap, .sa_flags = SA_SIGINFO};
	sigaction(SIGTRAP, &sa, NULL);

	post_fn ps = (post_fn)dlsym(h, "fake_post_send");
	post_fn db = (post_fn)dlsym(h, "fake_post_send_db");
	post_fn ho = (post_fn)dlsym(h, "fake_post_send_hoisted");
	complete_fn wc = (complete_fn)dlsym(h, "fake_wr_complete");
	post("post_send/healthy", ps, IBV_WR_SEND, 1, 0, 0, 0);
	post("post_send/healthy_inline", ps, IBV_WR_SEND, 1, IBV_SEND_INLINE, 0, 0);
	post("post_send/opcode", ps, 99, 1, 0, 0, 0);
	post("post_send/queue_full", ps, IBV_WR_SEND, 1, 0, 16, 0);
	post("post_send/too_many_sge", ps, IBV_WR_SEND, 3, 0, 0, 0);
	post("post_send/inline", ps, IBV_WR_SEND, 2, IBV_SEND_INLINE, 0, 0);
	post("post_send_db/healthy", db, IBV_WR_SEND, 1, 0, 0, 0);
	post("post_send_db/queue_full", db, IBV_WR_SEND, 1, 0, 63, 0);
	post("post_send_db/null_arg", db, IBV_WR_SEND, 1, 0, 0, 1);
	post("post_send_hoisted/healthy", ho, IBV_WR_SEND, 1, 0, 0, 0);
	post("post_send_hoisted/queue_full", ho, IBV_WR_SEND, 1, 0, 16, 0);
	static struct fake_qp q;
	cur_qp = &q;
	report("wr_complete/healthy", wc(&q.qpx));
	q.err = ENOMEM;
	report("wr_complete/recorded", wc(&q.qpx));
	return 0;
}
