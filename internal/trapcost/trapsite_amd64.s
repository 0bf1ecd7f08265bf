#include "textflag.h"

// func trapSite(x int) int
//
// Starts as a C function does (push %rbp), an instruction the kernel
// emulates at a uprobe: a hit is one trap, as on the verbs functions,
// not a trap and a single step.
TEXT ·trapSite(SB), NOSPLIT, $0-16
	PUSHQ BP
	POPQ BP
	MOVQ x+0(FP), AX
	INCQ AX
	MOVQ AX, ret+8(FP)
	RET

// func trapSiteAddr() uintptr: trapSite's own code, not the wrapper Go
// calls it through.
TEXT ·trapSiteAddr(SB), NOSPLIT, $0-8
	LEAQ ·trapSite(SB), AX
	MOVQ AX, ret+0(FP)
	RET
