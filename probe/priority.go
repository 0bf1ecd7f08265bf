package probe

import (
	"fmt"
	"runtime"
	"syscall"
)

// readerNice is the nice value of the thread that reads the ring while it
// reads. A target's busy threads outnumber the cores (16 posting threads
// on 2 cores is an ordinary shape), and the scheduler shares a core
// between runnable threads by weight: at the default weight the reader
// gets its 1/17 and the ring fills while it waits, though it needs a few
// percent of a core for what it reads (docs/design.md, "The reader"). At
// nice -10 its weight is 9.3 times a default thread's, so it runs when it
// has records to read; it sleeps between polls, so the target loses only
// the time the reader works.
const readerNice = -10

// raiseReader locks the calling goroutine to its thread and gives the
// thread readerNice; restore gives it back its nice value and unlocks it.
// Without the privilege (CAP_SYS_NICE) the reader runs at its own
// priority and err says so.
func raiseReader() (restore func(), err error) {
	runtime.LockOSThread()
	tid := syscall.Gettid()
	// getpriority(2) returns 20 - nice
	prev, err := syscall.Getpriority(syscall.PRIO_PROCESS, tid)
	if err != nil {
		runtime.UnlockOSThread()
		return func() {}, fmt.Errorf("reading the reader thread's priority: %w", err)
	}
	if err := syscall.Setpriority(syscall.PRIO_PROCESS, tid, readerNice); err != nil {
		runtime.UnlockOSThread()
		return func() {}, fmt.Errorf("raising the reader thread's priority to nice %d: %w (under a load of more busy threads than cores, records may be lost)", readerNice, err)
	}
	return func() {
		syscall.Setpriority(syscall.PRIO_PROCESS, tid, 20-prev)
		runtime.UnlockOSThread()
	}, nil
}
