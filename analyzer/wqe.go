package analyzer

import "github.com/sqscope/sqscope/trace"

// WQESize is the size in bytes of the WQE mlx5 builds for w on a QP of
// type typ (docs/design.md): what a replay of a WR stream under other
// settings (advise/) needs to know which post calls are BlueFlame writes.
func WQESize(typ trace.QPType, w *trace.WR) uint32 {
	q := sq{typ: typ}
	size, _ := q.wqeSize(w)
	return size
}

// BlueFlame reports whether a post call of n WRs whose last WQE is
// lastSize bytes (inline or not) is written by BlueFlame: one WR, inline
// or prefer_bf, and a WQE of more than 16 B that fits the BlueFlame
// buffer.
func (bf BFConfig) BlueFlame(n int, lastInline bool, lastSize uint32) bool {
	size16 := (lastSize + 15) / 16
	return !bf.ShutUpBF && n == 1 && (lastInline || bf.PreferBF) && size16 > 1 && size16 <= bfBufSize/16
}
