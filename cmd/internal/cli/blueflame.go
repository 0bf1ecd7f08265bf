package cli

import (
	"github.com/spf13/pflag"

	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/trace"
)

// BF holds the flags that mirror the target's libmlx5 BlueFlame settings,
// which a recording does not carry.
type BF struct{ preferBF, shutUpBF bool }

// Register adds --mlx5-prefer-bf and --mlx5-shut-up-bf to fs.
func (b *BF) Register(fs *pflag.FlagSet) {
	fs.BoolVar(&b.preferBF, "mlx5-prefer-bf", true, "the target ran with MLX5_POST_SEND_PREFER_BF=1; without the flag, what the recording says, else libmlx5's default")
	fs.BoolVar(&b.shutUpBF, "mlx5-shut-up-bf", false, "the target ran with MLX5_SHUT_UP_BF=1, no BlueFlame writes; without the flag, what the recording says, else off")
}

// Config is the target's BlueFlame setting: the flags when given, else
// what the recording says the target's environment held.
func (b *BF) Config(fs *pflag.FlagSet, fi trace.FileInfo) analyzer.BFConfig {
	bf := analyzer.BFFromEnv(fi.Env)
	if fs.Changed("mlx5-prefer-bf") {
		bf.PreferBF = b.preferBF
	}
	if fs.Changed("mlx5-shut-up-bf") {
		bf.ShutUpBF = b.shutUpBF
	}
	return bf
}
