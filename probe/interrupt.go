package probe

import (
	"context"
	"errors"
	"fmt"
)

// ErrInterrupted is wrapped by the error of an Open that Options.Context
// ended.
var ErrInterrupted = errors.New("interrupted")

// interrupted is nil until Options.Context is done, then an error
// wrapping ErrInterrupted with its cause. Each step of Open that can take
// long (a process's scan, each probe placed, each process of a host-wide
// trace) asks it first and stops there.
func (t *Tracer) interrupted() error {
	ctx := t.opts.Context
	if ctx == nil || ctx.Err() == nil {
		return nil
	}
	cause := context.Cause(ctx)
	if cause == nil || cause == context.Canceled {
		return ErrInterrupted
	}
	return fmt.Errorf("%w: %w", ErrInterrupted, cause)
}

// interrupted says whether done is closed (never, when it is nil).
func interrupted(done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}
