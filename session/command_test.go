package session

import (
	"reflect"
	"testing"
)

func TestParseCommand(t *testing.T) {
	tests := []struct {
		name    string
		line    string
		argv    []string
		env     []string
		cmd     []string
		target  string
		wantErr string
	}{
		{name: "command line", line: `app -s "64 B"`, cmd: []string{"app", "-s", "64 B"}, target: `app -s "64 B"`},
		{name: "assignments first", line: "MLX5_SHUT_UP_BF=1 A_2=x=y app", env: []string{"MLX5_SHUT_UP_BF=1", "A_2=x=y"}, cmd: []string{"app"}, target: "MLX5_SHUT_UP_BF=1 A_2=x=y app"},
		{name: "an assignment after the command is an argument", line: "app X=1", cmd: []string{"app", "X=1"}, target: "app X=1"},
		{name: "argv as given", argv: []string{"V=1", "ib_write_bw", "-s", "a b"}, env: []string{"V=1"}, cmd: []string{"ib_write_bw", "-s", "a b"}, target: "V=1 ib_write_bw -s a b"},
		{name: "not a name", line: "1X=1 app", cmd: []string{"1X=1", "app"}, target: "1X=1 app"},
		{name: "a path with =", line: "./a=b", cmd: []string{"./a=b"}, target: "./a=b"},
		{name: "only assignments", line: "VAR=1", wantErr: `"VAR=1": only variable assignments, no command to run`},
		{name: "unterminated quote", line: "app 'x", wantErr: `unterminated ' quote in "app 'x"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env, cmd, target, err := ParseCommand(tc.line, tc.argv)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(env, tc.env) && !(len(env) == 0 && len(tc.env) == 0) {
				t.Errorf("env %q, want %q", env, tc.env)
			}
			if !reflect.DeepEqual(cmd, tc.cmd) || target != tc.target {
				t.Errorf("command %q target %q, want %q %q", cmd, target, tc.cmd, tc.target)
			}
		})
	}
}
