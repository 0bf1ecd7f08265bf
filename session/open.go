package session

import (
	"context"
	"fmt"
	"time"

	"github.com/sqscope/sqscope/probe"
)

// interruptWait is how long an interrupted Start waits for the tracer to
// remove what it placed before it returns anyway: a step inside the
// kernel (a program's verification) cannot be cut, and the user asked to
// stop. The tracer is then closed in the background, or by the process's
// end (whatever it held, its hold watchdog continues).
const interruptWait = 500 * time.Millisecond

// openTracer is probe.Open, ended by ctx at once.
func openTracer(ctx context.Context, opts probe.Options) (*probe.Tracer, error) {
	if ctx == nil {
		return probe.Open(opts)
	}
	opts.Context = ctx
	type opened struct {
		tr  *probe.Tracer
		err error
	}
	ch := make(chan opened, 1)
	go func() {
		tr, err := probe.Open(opts)
		ch <- opened{tr, err}
	}()
	select {
	case o := <-ch:
		if o.err == nil || ctx.Err() == nil {
			return o.tr, o.err
		}
	case <-ctx.Done():
		select {
		case o := <-ch:
			if o.tr != nil {
				o.tr.Close()
			}
		case <-time.After(interruptWait):
			go func() {
				if o := <-ch; o.tr != nil {
					o.tr.Close()
				}
			}()
		}
	}
	return nil, fmt.Errorf("%w (%s) while attaching: nothing was traced", probe.ErrInterrupted, stopReason(ctx))
}
