package errsite_test

import (
	"fmt"
	"os"

	"github.com/sqscope/sqscope/probe/errsite"
)

// A tracer that found a QP's post_send at a file offset of its provider
// (from the ops table in the process's memory, or a symbol) asks where a
// uprobe sees only failures, and what to read there.
func Example() {
	const lib = "/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so"
	const postSend = 0x3cc0 // what the ops table's post_send maps to in this build
	if _, err := os.Stat(lib); err != nil {
		fmt.Println("no librxe here")
		return
	}
	r, err := errsite.Analyze(lib, errsite.Func{Start: postSend, Role: errsite.PostSend})
	if err != nil {
		fmt.Println(err) // not this build's post_send: say so, and trace with windows
		return
	}
	for _, s := range r.Sites {
		if s.Errno == 12 {
			fmt.Printf("uprobe %s:%#x sees %s (%v); the QP is in %s, the WR in %s\n",
				lib, s.Offset, s.ErrnoName(), s.Causes, s.QP, s.WR)
		}
	}
}
