package cli

import (
	"flag"

	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/trace"
)

// ModelFlags are the flags of the commands that read a recording (report,
// replay, export) for what it does not carry: the target's libmlx5
// BlueFlame settings.
type ModelFlags struct {
	fs                 *flag.FlagSet
	preferBF, shutUpBF bool
}

// RegisterModelFlags adds the flags to fs.
func RegisterModelFlags(fs *flag.FlagSet) *ModelFlags {
	m := &ModelFlags{fs: fs}
	fs.BoolVar(&m.preferBF, "mlx5-prefer-bf", true, "the target ran with MLX5_POST_SEND_PREFER_BF=1; without the flag, what the recording says, else libmlx5's default")
	fs.BoolVar(&m.shutUpBF, "mlx5-shut-up-bf", false, "the target ran with MLX5_SHUT_UP_BF=1, no BlueFlame writes; without the flag, what the recording says, else off")
	return m
}

// Options are the analyzer's options for a recording: the BlueFlame
// setting of the flags when given, else what the recording says the
// target's environment held, and the recording's tie to the wall clock.
func (m *ModelFlags) Options(fi trace.FileInfo) analyzer.Options {
	bf := analyzer.BFFromEnv(fi.Env)
	m.fs.Visit(func(fl *flag.Flag) {
		switch fl.Name {
		case "mlx5-prefer-bf":
			bf.PreferBF = m.preferBF
		case "mlx5-shut-up-bf":
			bf.ShutUpBF = m.shutUpBF
		}
	})
	return analyzer.Options{BF: bf, Clock: fi.Anchor()}
}
