// Package bpf holds sqscope's eBPF programs: verbs.bpf.c with the headers
// it includes (*.bpf.h, one per role), the one header they share with Go
// (events.h) and the bpf2go output generated from them. The programs
// `make bench` measures them against are in package bench. The generated
// .go and .o files are committed so that building needs no clang; `make
// generate` rebuilds them.
package bpf

//go:generate go tool bpf2go -target amd64 -type sq_hdr -type sq_qp_rec -type sq_cq_rec -type sq_post_rec -type sq_wr -type sq_poll_rec -type sq_wc -type sq_recv_rec -type sq_exit_rec -type sq_proc_rec -type sq_proc_op -type sq_key -type sq_cq_stats -type sq_qp_counters -type sq_caps -type sq_rec_kind -type sq_qp_op -type sq_via -type sq_fn -type sq_cq_op -type sq_gen_key -type sq_obj_rec -type sq_qp_final_rec -type sq_obj_type -type sq_obj_op -type sq_fail_rec -type sq_occ -type sq_occ_fail_rec -type sq_qpn_key -type sq_sig -type sq_qp_occ Verbs verbs.bpf.c -- -I. -I/usr/include/x86_64-linux-gnu -O2 -g -Wall -Werror
