package serve

import (
	"compress/gzip"
	"fmt"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

// maxScrapes is how many scrapes are answered at once; more get a 503.
const maxScrapes = 4

// metricsHandler answers /metrics by content negotiation: the Prometheus
// text format and OpenMetrics are written by the exposer from the
// collector's series (own adds the families it gathers, the process
// collector's); any other format (protobuf) is left to client_golang on
// full, which holds the collector and own's collectors.
type metricsHandler struct {
	c    *Collector
	own  prometheus.Gatherer
	full http.Handler
	// free keeps up to maxScrapes exposers, with their buffers, from one
	// scrape to the next (a sync.Pool would drop them at every GC)
	free     chan *exposer
	inFlight chan struct{}
}

func newMetricsHandler(c *Collector, own prometheus.Gatherer, full http.Handler) *metricsHandler {
	return &metricsHandler{c: c, own: own, full: full,
		free: make(chan *exposer, maxScrapes), inFlight: make(chan struct{}, maxScrapes)}
}

func (h *metricsHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	format := expfmt.NegotiateIncludingOpenMetrics(r.Header)
	om := format.FormatType() == expfmt.TypeOpenMetrics
	if !om && format.FormatType() != expfmt.TypeTextPlain {
		h.full.ServeHTTP(w, r)
		return
	}
	select {
	case h.inFlight <- struct{}{}:
		defer func() { <-h.inFlight }()
	default:
		http.Error(w, fmt.Sprintf("sqscope: %d scrapes under way, try again later", maxScrapes), http.StatusServiceUnavailable)
		return
	}
	x := h.get()
	defer h.put(x)
	others, err := h.own.Gather()
	if err == nil {
		x.reset()
		h.c.visit(x.emit)
		err = x.write(om, others)
	}
	if err != nil {
		http.Error(w, "sqscope: gathering metrics: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", string(format))
	if !acceptsGzip(r.Header.Get("Accept-Encoding")) {
		w.Write(x.out)
		return
	}
	w.Header().Set("Content-Encoding", "gzip")
	if x.gz == nil {
		x.gz, _ = gzip.NewWriterLevel(w, gzip.BestSpeed) // a valid level: no error
	} else {
		x.gz.Reset(w)
	}
	x.gz.Write(x.out)
	x.gz.Close()
}

func (h *metricsHandler) get() *exposer {
	select {
	case x := <-h.free:
		return x
	default:
		return &exposer{}
	}
}

func (h *metricsHandler) put(x *exposer) {
	select {
	case h.free <- x:
	default:
	}
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
