package session

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/spf13/pflag"

	"github.com/sqscope/sqscope/internal/durflag"
	"github.com/sqscope/sqscope/probe"
)

// AttachFlags say how a process traced after it started (-p) is looked
// into: how much of its memory the scan for its verbs objects may read,
// and where separate debug files are.
type AttachFlags struct {
	ScanMiB  int64
	ScanTime time.Duration
	// ScanTotalMiB and ScanTotalTime bound a host-wide trace's scans
	// (-a) taken together.
	ScanTotalMiB  int64
	ScanTotalTime time.Duration
	DebugDirs     []string
}

// Register adds --scan-mib, --scan-time, --scan-total-mib,
// --scan-total-time and --debug-dir to fs.
func (f *AttachFlags) Register(fs *pflag.FlagSet) {
	f.RegisterScan(fs, "-p, -a: ")
	fs.Int64Var(&f.ScanTotalMiB, "scan-total-mib", probe.DefaultScanTotalBytes>>20, "-a: read at most this many `MiB` in all, over every running process's memory scan")
	durflag.Var(fs, &f.ScanTotalTime, "scan-total-time", probe.DefaultScanTotalTime, "-a: spend at most `DURATION` in all on the running processes' memory scans")
}

// RegisterScan adds --scan-mib, --scan-time and --debug-dir to fs, each
// usage after prefix (which commands they act in).
func (f *AttachFlags) RegisterScan(fs *pflag.FlagSet, prefix string) {
	fs.Int64Var(&f.ScanMiB, "scan-mib", probe.DefaultScanBytes>>20, prefix+"read at most this many `MiB` of a running process's memory looking for its verbs contexts and QPs")
	durflag.Var(fs, &f.ScanTime, "scan-time", probe.DefaultScanTime, prefix+"spend at most `DURATION` (e.g. 10s or 10) looking for a running process's verbs contexts and QPs in its memory")
	DebugDirFlag(fs, &f.DebugDirs)
}

// Bounds are the bounds of one process's memory scan the flags give.
func (f *AttachFlags) Bounds() (probe.ScanBounds, error) {
	switch {
	case f.ScanMiB < 0:
		return probe.ScanBounds{}, fmt.Errorf("--scan-mib %d: want a positive size", f.ScanMiB)
	case f.ScanTime < 0:
		return probe.ScanBounds{}, fmt.Errorf("--scan-time %v: want a positive time", f.ScanTime)
	}
	return probe.ScanBounds{MaxBytes: f.ScanMiB << 20, MaxTime: f.ScanTime}, nil
}

// DebugDirFlag adds --debug-dir to fs: the directories of separate debug
// files, in dirs.
func DebugDirFlag(fs *pflag.FlagSet, dirs *[]string) {
	fs.Func("debug-dir", "a `DIR` of separate debug files (DIR/.build-id/xx/yyyy.debug, .gnu_debuglink targets); repeatable; default $SQSCOPE_DEBUG_DIR, else /usr/lib/debug", func(s string) error {
		*dirs = append(*dirs, filepath.Clean(s))
		return nil
	})
}

// options sets the probe options the flags say (0: the defaults).
func (f *AttachFlags) options(o *probe.Options) error {
	b, err := f.Bounds()
	switch {
	case err != nil:
		return err
	case f.ScanTotalMiB < 0:
		return fmt.Errorf("--scan-total-mib %d: want a positive size", f.ScanTotalMiB)
	case f.ScanTotalTime < 0:
		return fmt.Errorf("--scan-total-time %v: want a positive time", f.ScanTotalTime)
	}
	o.ScanBounds = b
	o.ScanTotal = probe.ScanBounds{MaxBytes: f.ScanTotalMiB << 20, MaxTime: f.ScanTotalTime}
	o.DebugDirs = f.DebugDirs
	return nil
}
