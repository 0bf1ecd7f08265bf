package analyzer

import "strings"

// The environment variables of libmlx5 that change the model.
const (
	envPreferBF = "MLX5_POST_SEND_PREFER_BF"
	envShutUpBF = "MLX5_SHUT_UP_BF"
)

// BFFromEnv reads libmlx5's BlueFlame knobs from a process environment
// (KEY=VALUE entries); what is not set keeps libmlx5's default.
func BFFromEnv(env []string) BFConfig {
	bf := DefaultBF
	for _, e := range env {
		k, v, _ := strings.Cut(e, "=")
		switch k {
		case envPreferBF:
			bf.PreferBF = v != "0"
		case envShutUpBF:
			bf.ShutUpBF = v != "0"
		}
	}
	return bf
}

// ModelEnv keeps the environment entries that change the HCA model, the
// ones a recording carries.
func ModelEnv(env []string) []string {
	var out []string
	for _, e := range env {
		if k, _, ok := strings.Cut(e, "="); ok && (k == envPreferBF || k == envShutUpBF) {
			out = append(out, e)
		}
	}
	return out
}
