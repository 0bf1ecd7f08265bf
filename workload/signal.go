package workload

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// usr1Waiter is armed before readiness is announced: SIGUSR1's default action
// kills the process, so it must be caught before anyone may send it.
type usr1Waiter struct{ ch chan os.Signal }

func armUSR1() *usr1Waiter {
	w := &usr1Waiter{ch: make(chan os.Signal, 1)}
	signal.Notify(w.ch, syscall.SIGUSR1)
	return w
}

func (w *usr1Waiter) wait(ctx context.Context) error {
	defer signal.Stop(w.ch)
	select {
	case <-w.ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
