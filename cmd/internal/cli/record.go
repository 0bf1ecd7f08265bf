package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/sqscope/sqscope/verbs/nicmodel"
)

// Record traces the target tf names into tf.RecordTo (or its flight
// recorder), and writes page (nil: none) with the NIC model nic; rest is
// what followed "--"; a started target writes to childOut (nil:
// sqscope's own); version goes into the recording's header.
func Record(ctx context.Context, tf *Target, page *TracePage, rest []string, stderr, childOut io.Writer, version string, nic nicmodel.Model) error {
	s, err := tf.Start(ctx, rest, stderr, childOut, version)
	if err != nil {
		return err
	}
	defer s.Close()
	page.Watch(tf, s)
	if tf.Flight != nil {
		return RecordFlight(ctx, tf, s, stderr)
	}
	rec := s.Recorder()
	runErr := s.Run(ctx) // however it ends, the file holds what was seen and why it ended
	if cerr := rec.Close(); cerr != nil {
		return errors.Join(runErr, fmt.Errorf("record: %w", cerr))
	}
	snap := s.Analyzer().Snapshot()
	// the target's events, as report counts them; the records are those
	// and sqscope's own (where its probes went, exits)
	fmt.Fprintf(tf.Notes(stderr), "sqscope: recorded %d events (%d records, %d bytes) of %d QP(s) to %s, %d lost; %s\n",
		snap.Events, rec.Events(), rec.Bytes(), len(snap.QPs), tf.RecordTo, snap.Lost, snap.Ended)
	if perr := page.Write(ctx, tf, nic, stderr); perr != nil && runErr == nil {
		runErr = fmt.Errorf("record: %w", perr)
	}
	if runErr == nil {
		runErr = tf.Status(snap)
	}
	return runErr
}
