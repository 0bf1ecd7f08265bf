package serve

import (
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// newGrace is how long a connection that has sent no request yet is kept
// from being replaced: a scraper sends its request as it connects.
const newGrace = time.Second

// connLimit is the listener serve accepts on: at most max connections
// open. At the bound, the next connection takes the place of the one idle
// longest (between two requests, or connected for newGrace without
// sending one) with no request waiting to be read, which is closed; while
// every one is in a request, the next waits in the kernel's backlog, in
// the order they came, until one ends.
// So idle keep-alive connections can neither hold sqscope's descriptors
// nor keep Prometheus out, and a scrape is queued, never refused.
type connLimit struct {
	net.Listener
	max     int
	mu      sync.Mutex
	open    int  // connections open, and the place taken for the next
	pending bool // a place is taken for the next connection
	idle    map[*limitedConn]idleSince
	changed chan struct{} // a connection closed or went idle
	done    chan struct{} // the listener is closed
	close   sync.Once
}

// idleSince is since when a connection is idle, and whether it has sent
// no request yet.
type idleSince struct {
	at    time.Time
	fresh bool
}

// limitedConn is an accepted connection, counted until closed.
type limitedConn struct {
	net.Conn
	l        *connLimit
	once     sync.Once
	released bool // closed: no longer counted (guarded by l.mu)
}

func newConnLimit(ln net.Listener, max int) *connLimit {
	return &connLimit{Listener: ln, max: max, idle: map[*limitedConn]idleSince{},
		changed: make(chan struct{}, 1), done: make(chan struct{})}
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c) })
	return err
}

func (l *connLimit) release(c *limitedConn) {
	l.mu.Lock()
	c.released = true
	delete(l.idle, c)
	l.open--
	l.mu.Unlock()
	l.signal()
}

func (l *connLimit) signal() {
	select {
	case l.changed <- struct{}{}:
	default:
	}
}

// Accept takes a place for the next connection (replacing an idle one or
// waiting for one to end), then accepts it.
func (l *connLimit) Accept() (net.Conn, error) {
	for {
		l.mu.Lock()
		if l.open < l.max {
			l.open++
			l.pending = true
			l.mu.Unlock()
			break
		}
		victim := l.longestIdle(time.Now())
		l.mu.Unlock()
		if victim != nil {
			victim.Close()
			continue
		}
		select {
		case <-l.changed:
		case <-time.After(newGrace / 4): // a fresh connection may pass its grace
		case <-l.done:
			return nil, net.ErrClosed
		}
	}
	c, err := l.Listener.Accept()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pending = false
	if err != nil {
		l.open--
		return nil, err
	}
	lc := &limitedConn{Conn: c, l: l}
	l.idle[lc] = idleSince{time.Now(), true}
	return lc, nil
}

// longestIdle is the connection to replace, or nil; l.mu is held.
func (l *connLimit) longestIdle(now time.Time) *limitedConn {
	var victim *limitedConn
	var since time.Time
	for c, s := range l.idle {
		if s.fresh && now.Sub(s.at) < newGrace || requestWaiting(c.Conn) {
			continue
		}
		if victim == nil || s.at.Before(since) {
			victim, since = c, s.at
		}
	}
	return victim
}

// requestWaiting says whether bytes wait to be read on c: a request the
// server has not read yet (a client that reuses a connection sends its
// next request as soon as it likes), which closing c would lose.
func requestWaiting(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	n := 0
	rc.Control(func(fd uintptr) { n, _ = unix.IoctlGetInt(int(fd), unix.SIOCINQ) })
	return n > 0
}

// state follows a connection through the server (http.Server's
// ConnState): idle between requests, busy in one.
func (l *connLimit) state(c net.Conn, s http.ConnState) {
	lc, ok := c.(*limitedConn)
	if !ok {
		return
	}
	l.mu.Lock()
	if !lc.released {
		switch s {
		case http.StateIdle:
			l.idle[lc] = idleSince{at: time.Now()}
		case http.StateActive, http.StateHijacked, http.StateClosed:
			delete(l.idle, lc)
		}
	}
	l.mu.Unlock()
	if s == http.StateIdle {
		l.signal()
	}
}

// Open is how many connections are open now.
func (l *connLimit) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pending {
		return l.open - 1
	}
	return l.open
}

func (l *connLimit) Close() error {
	l.close.Do(func() { close(l.done) })
	return l.Listener.Close()
}
