package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/internal/durflag"
	"github.com/sqscope/sqscope/session"
)

// FlightFlags are the flight recorder's flags (record, serve).
type FlightFlags struct {
	window   time.Duration
	after    time.Duration
	mib      int
	maxFiles int
	triggers []session.FlightTrigger
}

// flightMiBPerSecond sizes the default memory bound: the blocks of a
// second of the fastest trace the reader keeps up with (BENCHMARKS.md)
// take less.
const flightMiBPerSecond = 16

// On says whether --flight was given.
func (ff *FlightFlags) On() bool { return ff.window != 0 }

// Register adds the flags to fs.
func (ff *FlightFlags) Register(fs *pflag.FlagSet) {
	durflag.Var(fs, &ff.window, "flight", 0, "flight recorder: keep the events of the last `DURATION` (e.g. 10s or 10) in memory and write nothing until a --trigger; -o is then a directory")
	durflag.Var(fs, &ff.after, "after", 5*time.Second, "flight recorder: how long after a trigger its recording goes on, a `DURATION` such as 5s or 5")
	fs.IntVar(&ff.mib, "flight-mib", 0, fmt.Sprintf("flight recorder: memory bound of the events kept, in `MiB`; the oldest go first, counted (default %d per second of --flight, at least 64)", flightMiBPerSecond))
	fs.IntVar(&ff.maxFiles, "max-files", 10, "flight recorder: the `N` recordings kept in the directory, the oldest removed")
	fs.Func("trigger", "flight recorder: the `TRIGGER`: enomem (a post failed with ENOMEM), diagnosis[=KIND|SEVERITY], signal (SIGUSR1); repeatable", func(s string) error {
		t, err := session.ParseFlightTrigger(s)
		if err == nil {
			ff.triggers = append(ff.triggers, t)
		}
		return err
	})
}

// Complete makes c's --trigger complete to the triggers, every
// diagnosis kind and severity among them.
func (ff *FlightFlags) Complete(c *cobra.Command) {
	values := []string{"enomem\ta post failed with ENOMEM", "diagnosis\tany diagnosis", "signal\tSIGUSR1 sent to sqscope",
		"diagnosis=error\ta diagnosis of this severity", "diagnosis=warning\ta diagnosis of this severity or worse",
		"diagnosis=prediction\ta diagnosis of this severity or worse"}
	kinds, sevs := analyzer.DiagKindNames()
	for i, k := range kinds {
		values = append(values, "diagnosis="+k+"\tthis diagnosis ("+sevs[i]+")")
	}
	Values(c, "trigger", values...)
}

// Apply sets tf.Flight to the flight configuration for the directory dir
// (nil without --flight) from the flags fs parsed; a flight recorder never
// replaces a file, so --force is refused with it.
func (ff *FlightFlags) Apply(tf *Target, dir string, fs *pflag.FlagSet) error {
	set := map[string]bool{}
	fs.Visit(func(f *pflag.Flag) { set[f.Name] = true })
	flight, err := ff.Config(dir, tf.Mode, set)
	switch {
	case err != nil:
		return err
	case flight != nil && tf.Force:
		return errors.New("--force: a flight recorder never replaces a file")
	}
	tf.Flight = flight
	return nil
}

// Config is the session's flight configuration for the directory dir and
// the probe mode, nil when --flight is not given; set says which flags
// were given.
func (ff *FlightFlags) Config(dir, mode string, set map[string]bool) (*session.FlightConfig, error) {
	if ff.window == 0 {
		for _, n := range []string{"after", "flight-mib", "max-files", "trigger"} {
			if set[n] {
				return nil, fmt.Errorf("--%s needs --flight DURATION", n)
			}
		}
		return nil, nil
	}
	mib := ff.mib
	if !set["flight-mib"] {
		mib = max(64, int(ff.window.Seconds()*flightMiBPerSecond+0.999))
	}
	if mib <= 0 || mib > 1<<20 {
		return nil, fmt.Errorf("--flight-mib %d: want 1 to %d", ff.mib, 1<<20)
	}
	if mode != session.ModeEvents && mode != session.ModeSentinel && slices.ContainsFunc(ff.triggers, func(t session.FlightTrigger) bool { return t.On == session.TriggerENOMEM }) {
		return nil, fmt.Errorf("--trigger enomem needs --mode events or sentinel: --mode %s records no failed post", mode)
	}
	cfg := &session.FlightConfig{Dir: dir, Window: ff.window, After: ff.after, MaxBytes: int64(mib) << 20,
		MaxFiles: ff.maxFiles, Triggers: ff.triggers}
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	if slices.ContainsFunc(ff.triggers, func(t session.FlightTrigger) bool { return t.On == session.TriggerSignal }) {
		session.HoldFlightSignal() // a SIGUSR1 during the attach must not end sqscope
	}
	return cfg, nil
}

// RecordFlight runs the flight recorder of s and says what it wrote.
func RecordFlight(ctx context.Context, tf *Target, s *session.Session, stderr io.Writer) error {
	f := s.Flight()
	runErr := s.Run(ctx)
	cerr := f.Close()
	st := f.Stats()
	snap := s.Analyzer().Snapshot()
	var written []string
	for _, k := range slices.Sorted(maps.Keys(st.Written)) {
		written = append(written, fmt.Sprintf("%d on %s", st.Written[k], k))
	}
	if len(written) == 0 {
		written = append(written, "none: no trigger fired")
	}
	fmt.Fprintf(tf.Notes(stderr), "sqscope: flight recorder: recordings written: %s; %d kept in %s; %d trigger(s) during a recording's window (in it); %d event(s) dropped by --flight-mib before their time; %d lost; %s\n",
		strings.Join(written, ", "), len(st.Files), tf.RecordTo, st.Absorbed, st.Dropped, snap.Lost, snap.Ended)
	if cerr != nil {
		return errors.Join(runErr, fmt.Errorf("record: %w", cerr))
	}
	if runErr == nil {
		runErr = tf.Status(snap)
	}
	return runErr
}
