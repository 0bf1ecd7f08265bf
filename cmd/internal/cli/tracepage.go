package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/pflag"

	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/internal/outfile"
	"github.com/sqscope/sqscope/reportpage"
	"github.com/sqscope/sqscope/session"
	"github.com/sqscope/sqscope/trace"
	"github.com/sqscope/sqscope/verbs/nicmodel"
)

// TracePage is --html FILE of trace and record: the page report --html
// writes, of what was traced, written when the trace ends. Its methods
// do nothing when the flag was not given (or on a nil TracePage).
type TracePage struct {
	Path string
	out  *Output
	live *reportpage.Live // the page of a live trace (Watch)
}

// Register adds --html to fs.
func (p *TracePage) Register(fs *pflag.FlagSet) {
	fs.Func("html", "also write the HTML report of what was traced, as 'sqscope report --html' does, to `FILE` when the trace ends (- for stdout, not a terminal); an existing file keeps its mode and is replaced only by a complete page, a new one is 0600", func(v string) error {
		if v == "" {
			return fmt.Errorf("give a file name (or %s for stdout)", outfile.Stdout)
		}
		p.Path = v
		return nil
	})
}

// Open creates the page's file before the target starts, so that a path
// it cannot be written to fails at once, as a usage error, with nothing
// started: never through a symbolic link, over an existing recording,
// the recording tf writes or the command's other outputs (others), nor
// to standard output when that is a terminal or carries what
// stdoutCarries says (empty: nothing).
func (p *TracePage) Open(cmd string, tf *Target, others []string, stdoutCarries string, stdout io.Writer) error {
	if p.Path == "" {
		return nil
	}
	switch {
	case tf.Flight != nil:
		return UsageErr("%s: --html: a flight recorder writes a recording on each trigger: run sqscope report --html on one", cmd)
	case p.Path == outfile.Stdout && stdoutCarries != "":
		return UsageErr("%s: --html -: standard output carries %s: give --html FILE", cmd, stdoutCarries)
	}
	for _, o := range append([]string{tf.RecordTo}, others...) {
		if o != "" && o != outfile.Stdout && p.Path != outfile.Stdout && samePath(o, p.Path) {
			return UsageErr("%s: --html %s: that file is also an output of the command: give another", cmd, p.Path)
		}
	}
	out, err := createOutput("--html", p.Path, others, false, false, stdout)
	if err != nil {
		return UsageErr("%s: %v", cmd, err)
	}
	p.out = out
	return nil
}

// samePath says a and b name one file: the same file when both exist,
// else the same name in the same directory, links followed.
func samePath(a, b string) bool {
	sa, errA := os.Stat(a)
	sb, errB := os.Stat(b)
	if errA == nil && errB == nil {
		return os.SameFile(sa, sb)
	}
	return resolved(a) == resolved(b)
}

func resolved(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return path
	}
	if dir, err := filepath.EvalSymlinks(filepath.Dir(abs)); err == nil {
		return filepath.Join(dir, filepath.Base(abs))
	}
	return abs
}

// ToStdout says the page goes to standard output (then a started
// target's output must not).
func (p *TracePage) ToStdout() bool { return p != nil && p.out != nil && !p.out.IsFile() }

// fromRecording says the page is read back from the file tf records to.
func fromRecording(tf *Target) bool { return tf.RecordTo != "" && tf.RecordTo != outfile.Stdout }

// Watch adds to the session, before Run, what the page of a live trace
// needs of its events (reportpage.NewLive). A page read back from the
// recording needs nothing.
func (p *TracePage) Watch(tf *Target, s *session.Session) {
	if p == nil || p.out == nil || fromRecording(tf) {
		return
	}
	p.live = reportpage.NewLive(s)
}

// Write writes the page once the trace has ended, commits it and says so
// on stderr: read back from the recording tf wrote, as report --html
// reads one, with the advice on the NIC model nic; else of the session
// (Watch), each QP's occupancy the history the trace kept of it.
func (p *TracePage) Write(ctx context.Context, tf *Target, nic nicmodel.Model, stderr io.Writer) error {
	if p == nil || p.out == nil {
		return nil
	}
	var snap analyzer.Snapshot
	var err error
	switch {
	case fromRecording(tf):
		ctx = context.WithoutCancel(ctx) // the Ctrl-C that ended the trace does not end its page
		var rc *reportpage.Recording
		if rc, err = reportpage.Read(ctx, tf.RecordTo, func(fi trace.FileInfo) analyzer.BFConfig { return analyzer.BFFromEnv(fi.Env) }); err == nil {
			snap, err = rc.Snap, rc.WritePage(ctx, p.out, p.out.Name, nic)
		}
	case p.live == nil:
		return fmt.Errorf("the page %s: the trace was not watched for it", p.out.Name)
	default:
		why := "advise replays a recording's WR streams, and a trace keeps none: sqscope record -o FILE --html PAGE records them and advises"
		if tf.RecordTo == outfile.Stdout {
			why = "advise replays a recording's WR streams, and this one went to standard output, not to a file to read back: sqscope report --html reads a recording and advises"
		}
		if snap, err = p.live.Write(p.out, why); err == nil {
			err = p.out.Commit()
		}
	}
	if err != nil {
		return fmt.Errorf("writing the page %s: %w", p.out.Name, err)
	}
	if p.out.IsFile() {
		fmt.Fprintf(tf.Notes(stderr), "sqscope: wrote %s: %d QPs, %d diagnoses\n", p.out.Name, len(snap.QPs), len(snap.Diagnoses))
	}
	return nil
}

// Discard removes a page not written (a no-op once written).
func (p *TracePage) Discard() {
	if p != nil && p.out != nil {
		p.out.Discard()
	}
}
