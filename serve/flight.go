package serve

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sqscope/sqscope/session"
)

// The flight recorder's families (serve --flight-dir).
var (
	flightFam = newFamily("sqscope_flight_recordings_total",
		"Recordings the flight recorder (--flight-dir) wrote, by what triggered them: enomem, signal, diagnosis=KIND.",
		prometheus.CounterValue, "trigger")
	flightLatestFam = newFamily("sqscope_flight_latest_recording_info",
		"1 for the newest recording the flight recorder wrote whole: its file name in --flight-dir and its trigger; none before the first.",
		prometheus.GaugeValue, "file", "trigger")
	flightLatestTimeFam = newFamily("sqscope_flight_latest_recording_timestamp_seconds",
		"When the newest recording of the flight recorder was complete, in seconds since the Unix epoch; none before the first.",
		prometheus.GaugeValue)
	flightBytesFam = newFamily("sqscope_flight_window_bytes",
		"Bytes of encoded events the flight recorder's window holds in memory, at most sqscope_flight_window_max_bytes.",
		prometheus.GaugeValue)
	flightMaxBytesFam = newFamily("sqscope_flight_window_max_bytes",
		"The bound of the flight recorder's window in memory (--flight-mib), in bytes.",
		prometheus.GaugeValue)
	flightDroppedFam = newFamily("sqscope_flight_window_dropped_events_total",
		"Events the flight recorder's memory bound (--flight-mib) dropped from its window before their time, the oldest first.",
		prometheus.CounterValue)
	flightAbsorbedFam = newFamily("sqscope_flight_absorbed_triggers_total",
		"Triggers that came while the flight recorder was writing a recording: in that recording, no file of their own.",
		prometheus.CounterValue)
)

// AttachFlight gives the collector the session's flight recorder.
func (c *Collector) AttachFlight(f *session.Flight) { c.attachFlight(f.Stats) }

// attachFlight reads the flight recorder's state from stats.
func (c *Collector) attachFlight(stats func() session.FlightStats) { c.flight.Store(&stats) }

// flightStats is the flight recorder's state, false without one.
func (c *Collector) flightStats() (session.FlightStats, bool) {
	stats := c.flight.Load()
	if stats == nil {
		return session.FlightStats{}, false
	}
	return (*stats)(), true
}

// visitFlight emits the flight recorder's series, none without one.
func (c *Collector) visitFlight(emit emitFunc) {
	st, ok := c.flightStats()
	if !ok {
		return
	}
	for _, trigger := range slices.Sorted(maps.Keys(st.Written)) {
		emit(flightFam, float64(st.Written[trigger]), trigger)
	}
	if l := st.Latest; l.Path != "" {
		emit(flightLatestFam, 1, filepath.Base(l.Path), l.Trigger)
		emit(flightLatestTimeFam, float64(l.Done.Unix())+float64(l.Done.Nanosecond())/1e9)
	}
	emit(flightBytesFam, float64(st.RingBytes))
	emit(flightMaxBytesFam, float64(st.MaxBytes))
	emit(flightDroppedFam, float64(st.Dropped))
	emit(flightAbsorbedFam, float64(st.Absorbed))
}

// flightHealth is the line /healthz adds about the newest flight
// recording, "" when none was written.
func (c *Collector) flightHealth() string {
	st, ok := c.flightStats()
	if !ok || st.Latest.Path == "" {
		return ""
	}
	l := st.Latest
	return fmt.Sprintf("latest flight recording: %s (trigger %s, complete %s)", l.Path, l.Trigger, l.Done.UTC().Format(time.RFC3339Nano))
}
