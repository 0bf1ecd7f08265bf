/* Part of verbs.bpf.c: the sentinel mode's error-site probe. A uprobe on
 * an instruction of a provider's post_send or wr_complete that runs only
 * when the call fails (probe/errsite finds them); its cookie says where
 * the QP and the WR (or the errno) are there (events.h, SQ_SITE_*). A
 * healthy application never runs it. */
#ifndef SQSCOPE_SENTINEL_BPF_H
#define SQSCOPE_SENTINEL_BPF_H

/* site_reg is the register numbered as x86 numbers them (rax 0, rcx 1,
 * rdx 2, rbx 3, rsp 4, rbp 5, rsi 6, rdi 7, r8..r15), from a copy of the
 * registers: the verifier refuses a read of the context at an offset it
 * cannot fold. */
static __always_inline __u64 site_reg(struct pt_regs *ctx, __u32 r)
{
	struct pt_regs regs;
	__u64 v;

	if (bpf_probe_read_kernel(&regs, sizeof(regs), ctx))
		return 0;
	switch (r & 15) {
	case 0: v = regs.rax; break;
	case 1: v = regs.rcx; break;
	case 2: v = regs.rdx; break;
	case 3: v = regs.rbx; break;
	case 4: v = regs.rsp; break;
	case 5: v = regs.rbp; break;
	case 6: v = regs.rsi; break;
	case 7: v = regs.rdi; break;
	case 8: v = regs.r8; break;
	case 9: v = regs.r9; break;
	case 10: v = regs.r10; break;
	case 11: v = regs.r11; break;
	case 12: v = regs.r12; break;
	case 13: v = regs.r13; break;
	case 14: v = regs.r14; break;
	default: v = regs.r15; break;
	}
	return v;
}

/* sign_ext extends the low bits of v, a two's complement field. */
static __always_inline __s64 sign_ext(__u64 v, __u32 bits)
{
	return (__s64)(v << (64 - bits)) >> (64 - bits);
}

/* site_loc reads the value at a location of the cookie (loc: kind 2 bits,
 * register 4 bits, stack offset SQ_SITE_LOC_OFF_BITS in 8-byte units);
 * *ok is 0 when there is none or it cannot be read. */
static __always_inline __u64 site_loc(struct pt_regs *ctx, __u64 loc, int *ok)
{
	__u32 kind = loc & 3, reg = (loc >> 2) & 15;
	__s64 off = sign_ext(loc >> 6, SQ_SITE_LOC_OFF_BITS) * 8;
	__u64 v = 0;

	*ok = 0;
	if (kind == SQ_LOC_REG) {
		*ok = 1;
		return site_reg(ctx, reg);
	}
	if (kind == SQ_LOC_STACK &&
	    !bpf_probe_read_user(&v, sizeof(v), (void *)(PT_REGS_SP(ctx) + off)))
		*ok = 1;
	return v;
}

SEC("uprobe")
int error_site(struct pt_regs *ctx)
{
	__u64 cookie = bpf_get_attach_cookie(ctx), id = bpf_get_current_pid_tgid();
	__u64 loca = (cookie >> SQ_SITE_LOCA_SHIFT) & ((1ULL << (SQ_SITE_LOCB_SHIFT - SQ_SITE_LOCA_SHIFT)) - 1);
	__u64 locb = cookie >> SQ_SITE_LOCB_SHIFT;
	__u32 err = (cookie >> SQ_SITE_ERRNO_SHIFT) & 0xff;
	struct sq_fail_rec r = {};
	struct thread_state *st;
	struct sge sge;
	__u64 v, sgl;
	int ok, i;

	if (!wanted(id >> 32) || past_cut())
		return 0;
	fill_hdr(&r.hdr, SQ_REC_POST_FAIL, id, 0);
	r.cookie = cookie;
	r.state = -1;
	v = site_loc(ctx, loca & ((1ULL << (6 + SQ_SITE_LOC_OFF_BITS)) - 1), &ok);
	if (ok && v) {
		r.qp = v - sign_ext(loca >> (6 + SQ_SITE_LOC_OFF_BITS), SQ_SITE_ADJ_BITS);
		r.qp_num = read_u32(r.qp + IBV_QP_QP_NUM);
		r.state = (__s32)read_u32(r.qp + IBV_QP_STATE_FIELD);
	}
	st = thread_state(id, 0);
	if (st && r.qp && st->post.live && st->post.op == SQ_OP_POST_SEND && st->post.a0 == r.qp)
		r.traced = 1;
	v = site_loc(ctx, locb, &ok);
	if (!err) {
		r.err = ok ? (__s32)v : 0;
		output_now(&r, sizeof(r));
		return 0;
	}
	r.err = err;
	if (ok && v) {
		r.wr = v;
		r.wr_id = read_u64(v + IBV_SEND_WR_WR_ID);
		r.num_sge = read_u32(v + IBV_SEND_WR_NUM_SGE);
		r.opcode = read_u32(v + IBV_SEND_WR_OPCODE);
		r.send_flags = read_u32(v + IBV_SEND_WR_SEND_FLAGS);
		sgl = read_u64(v + IBV_SEND_WR_SG_LIST);
		r.has_wr = 1;
		for (i = 0; i < SQ_FAIL_SGES; i++) {
			if (i >= r.num_sge)
				break;
			if (bpf_probe_read_user(&sge, sizeof(sge), (void *)(sgl + i * IBV_SGE_SIZE)))
				break;
			r.bytes += sge.length;
		}
		if (r.num_sge > SQ_FAIL_SGES)
			r.sge_over = r.num_sge - SQ_FAIL_SGES > 255 ? 255 : r.num_sge - SQ_FAIL_SGES;
	}
	output_now(&r, sizeof(r));
	return 0;
}

#endif /* SQSCOPE_SENTINEL_BPF_H */
