package serve

import (
	"maps"
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sqscope/sqscope/session"
)

// flightFam counts the flight recorder's files (serve --flight-dir).
var flightFam = newFamily("sqscope_flight_recordings_total",
	"Recordings the flight recorder (--flight-dir) wrote, by what triggered them: enomem, signal, diagnosis=KIND.",
	prometheus.CounterValue, "trigger")

// AttachFlight gives the collector the session's flight recorder.
func (c *Collector) AttachFlight(f *session.Flight) { c.flight.Store(f) }

// visitFlight emits the flight recorder's counts, none without one.
func (c *Collector) visitFlight(emit emitFunc) {
	f := c.flight.Load()
	if f == nil {
		return
	}
	written := f.Stats().Written
	for _, trigger := range slices.Sorted(maps.Keys(written)) {
		emit(flightFam, float64(written[trigger]), trigger)
	}
}
