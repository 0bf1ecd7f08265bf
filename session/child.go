package session

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// stopChild ends a command sqscope started, as a terminal's Ctrl-C would,
// then more firmly: SIGINT, SIGTERM after 3 s, SIGKILL after 2 s more.
// With KeepTarget, or for a process sqscope attached to, it does nothing.
// It reports whether the command has exited.
func (s *Session) stopChild(childDone <-chan struct{}) bool {
	if s.child == nil || s.cfg.KeepTarget {
		return false
	}
	for _, step := range []struct {
		sig   syscall.Signal
		grace time.Duration
	}{{syscall.SIGINT, 3 * time.Second}, {syscall.SIGTERM, 2 * time.Second}, {syscall.SIGKILL, 2 * time.Second}} {
		for _, pid := range append(descendants(s.pid), s.pid) {
			syscall.Kill(pid, step.sig) // the whole tree, as a terminal signals its job
		}
		select {
		case <-childDone:
			return true
		case <-time.After(step.grace):
		}
	}
	return false
}

// descendants lists the processes below pid (children, theirs, ...), from
// /proc.
func descendants(pid int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	kids := map[int][]int{}
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 2 {
			continue
		}
		if pp, err := strconv.Atoi(f[1]); err == nil {
			kids[pp] = append(kids[pp], p)
		}
	}
	var out []int
	for queue := kids[pid]; len(queue) > 0; queue = queue[1:] {
		out = append(out, queue[0])
		queue = append(queue, kids[queue[0]]...)
	}
	return out
}
