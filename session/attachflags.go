package session

import (
	"flag"
	"fmt"
	"path/filepath"
	"time"

	"github.com/sqscope/sqscope/probe"
)

// AttachFlags say how a process traced after it started (-p) is looked
// into: how much of its memory the scan for its verbs objects may read,
// and where separate debug files are.
type AttachFlags struct {
	ScanMiB   int64
	ScanTime  time.Duration
	DebugDirs []string
}

// Register adds --scan-mib, --scan-time and --debug-dir to fs.
func (f *AttachFlags) Register(fs *flag.FlagSet) {
	fs.Int64Var(&f.ScanMiB, "scan-mib", probe.DefaultScanBytes>>20, "-p: read at most this many MiB of the process's memory looking for its verbs contexts and QPs")
	fs.DurationVar(&f.ScanTime, "scan-time", probe.DefaultScanTime, "-p: spend at most this long looking for its verbs contexts and QPs in its memory")
	fs.Func("debug-dir", "a directory of separate debug files (DIR/.build-id/xx/yyyy.debug, .gnu_debuglink targets); repeatable; default $SQSCOPE_DEBUG_DIR, else /usr/lib/debug", func(s string) error {
		f.DebugDirs = append(f.DebugDirs, filepath.Clean(s))
		return nil
	})
}

// options sets the probe options the flags say (0: the defaults).
func (f *AttachFlags) options(o *probe.Options) error {
	switch {
	case f.ScanMiB < 0:
		return fmt.Errorf("--scan-mib %d: want a positive size", f.ScanMiB)
	case f.ScanTime < 0:
		return fmt.Errorf("--scan-time %v: want a positive time", f.ScanTime)
	}
	o.ScanBounds = probe.ScanBounds{MaxBytes: f.ScanMiB << 20, MaxTime: f.ScanTime}
	o.DebugDirs = f.DebugDirs
	return nil
}
