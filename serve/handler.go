package serve

import (
	"bytes"
	"compress/gzip"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

// shareFor is how long one rendered scrape answers every scrape of its
// format. Scrapes that come together (two Prometheus servers, a dashboard,
// a flood) share one snapshot and one body, so neither memory nor the
// analyzer's lock is taken once per scraper, and none is refused: a
// scrape that finds a render under way waits for it. Prometheus scrapes a
// target every few seconds at most, so a body is never older than one
// of its intervals.
const shareFor = time.Second

// metricsHandler answers /metrics by content negotiation: the Prometheus
// text format and OpenMetrics are written by the exposer from the
// collector's series (own adds the families it gathers, the process
// collector's); any other format (protobuf) is encoded by client_golang
// from full, which holds the collector and own's collectors. Every format
// is rendered by one scrape at a time and its body shared (shareFor).
type metricsHandler struct {
	c     *Collector
	own   prometheus.Gatherer
	full  prometheus.Gatherer
	share time.Duration
	now   func() time.Time

	mu     sync.Mutex
	bodies map[expfmt.Format]*body // the newest of each format

	// render: one render (or compression) at a time, with these buffers,
	// kept from one to the next
	render sync.Mutex
	x      exposer
	gz     *gzip.Writer
}

var errRender = errors.New("the render failed")

// body is one rendered scrape, shared by every scrape that takes it: its
// bytes never change once ready is closed.
type body struct {
	at     time.Time // when its render began
	ready  chan struct{}
	data   []byte
	err    error
	gzOnce sync.Once
	gz     []byte
}

func newMetricsHandler(c *Collector, own, full prometheus.Gatherer) *metricsHandler {
	return &metricsHandler{c: c, own: own, full: full, share: shareFor, now: time.Now, bodies: map[expfmt.Format]*body{}}
}

func (h *metricsHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	format := expfmt.NegotiateIncludingOpenMetrics(r.Header)
	b := h.body(format)
	select {
	case <-b.ready:
	case <-r.Context().Done():
		return // the scraper left
	}
	if b.err != nil {
		http.Error(w, "sqscope: gathering metrics: "+b.err.Error(), http.StatusInternalServerError)
		return
	}
	data := b.data
	if acceptsGzip(r.Header.Get("Accept-Encoding")) {
		data = h.gzipped(b)
		w.Header().Set("Content-Encoding", "gzip")
	}
	w.Header().Set("Content-Type", string(format))
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	if r.Method != http.MethodHead {
		w.Write(data)
	}
}

// body is the body a scrape of format answers with: the newest one while
// it is being rendered or younger than h.share, else a new one, which this
// scrape renders.
func (h *metricsHandler) body(format expfmt.Format) *body {
	now := h.now()
	h.mu.Lock()
	b := h.bodies[format]
	if b != nil && b.shared(now, h.share) {
		h.mu.Unlock()
		return b
	}
	b = &body{at: now, ready: make(chan struct{})}
	h.bodies[format] = b
	h.mu.Unlock()
	defer close(b.ready)
	h.render.Lock()
	defer h.render.Unlock()
	b.err = errRender // until it returns
	b.data, b.err = h.rendered(format)
	return b
}

// shared says whether another scrape takes b: while it is rendered, or
// rendered well and younger than share.
func (b *body) shared(now time.Time, share time.Duration) bool {
	select {
	case <-b.ready:
		return b.err == nil && now.Sub(b.at) < share
	default:
		return true
	}
}

// rendered is a new body of format; h.render is held.
func (h *metricsHandler) rendered(format expfmt.Format) ([]byte, error) {
	switch t := format.FormatType(); t {
	case expfmt.TypeOpenMetrics, expfmt.TypeTextPlain:
		others, err := h.own.Gather()
		if err != nil {
			return nil, err
		}
		x := &h.x
		x.reset()
		h.c.visit(x.emit)
		if err := x.write(t == expfmt.TypeOpenMetrics, others); err != nil {
			return nil, err
		}
		// the body keeps the buffer: the next render makes one of about
		// its size
		out := x.out
		x.out, x.outHint = nil, len(out)+len(out)/8
		return out, nil
	}
	mfs, err := h.full.Gather()
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, format)
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			return nil, err
		}
	}
	if c, ok := enc.(expfmt.Closer); ok {
		if err := c.Close(); err != nil {
			return nil, err
		}
	}
	return buf.Bytes(), nil
}

// gzipped is b's data compressed, once for every scrape that asks.
func (h *metricsHandler) gzipped(b *body) []byte {
	b.gzOnce.Do(func() {
		h.render.Lock()
		defer h.render.Unlock()
		var buf bytes.Buffer
		if h.gz == nil {
			h.gz, _ = gzip.NewWriterLevel(&buf, gzip.BestSpeed) // a valid level: no error
		} else {
			h.gz.Reset(&buf)
		}
		h.gz.Write(b.data) // into memory: no error
		h.gz.Close()
		b.gz = buf.Bytes()
	})
	return b.gz
}

// acceptsGzip says whether an Accept-Encoding header accepts gzip (and
// does not refuse it with q=0).
func acceptsGzip(h string) bool {
	for _, part := range strings.Split(h, ",") {
		coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if !strings.EqualFold(strings.TrimSpace(coding), "gzip") {
			continue
		}
		q := strings.ReplaceAll(params, " ", "")
		return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
	}
	return false
}
