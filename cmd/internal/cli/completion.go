package cli

import (
	"fmt"
	"io"
	"strings"
)

// Completion writes a completion script for shell (bash, zsh or fish) of
// program prog with the given commands. Flags are completed from each
// command's own --help, so the script never goes stale.
func Completion(w io.Writer, shell, prog string, commands []string) error {
	cmds := strings.Join(commands, " ")
	fn := "_" + strings.ReplaceAll(prog, "-", "_")
	var err error
	switch shell {
	case "bash", "zsh":
		if shell == "zsh" {
			_, err = fmt.Fprintln(w, "autoload -U +X bashcompinit && bashcompinit")
		}
		_, err = fmt.Fprintf(w, `%[1]s() {
	local cur=${COMP_WORDS[COMP_CWORD]}
	if [ "$COMP_CWORD" -eq 1 ]; then
		COMPREPLY=($(compgen -W "%[3]s help" -- "$cur"))
	elif [ "${COMP_WORDS[1]}" = help ] && [ "$COMP_CWORD" -eq 2 ]; then
		COMPREPLY=($(compgen -W "%[3]s" -- "$cur"))
	elif [[ $cur == -* ]]; then
		COMPREPLY=($(compgen -W "$(%[2]s "${COMP_WORDS[1]}" --help 2>/dev/null | awk '/^  -/ {gsub(",", ""); for (i = 1; i <= NF; i++) if ($i ~ /^-/) print $i}')" -- "$cur"))
	else
		COMPREPLY=($(compgen -f -- "$cur"))
	fi
}
complete -o filenames -F %[1]s %[2]s
`, fn, prog, cmds)
	case "fish":
		_, err = fmt.Fprintf(w, `complete -c %[1]s -f -n __fish_use_subcommand -a "%[2]s help"
complete -c %[1]s -n 'not __fish_use_subcommand' -a '(%[1]s (commandline -opc)[2] --help 2>/dev/null | string match -r -- "^  -.*" | string replace -a "," "" | string split " " | string match -r -- "^-.+")'
complete -c %[1]s -n 'not __fish_use_subcommand' -F
`, prog, cmds)
	default:
		return fmt.Errorf("completion for %q: want bash, zsh or fish", shell)
	}
	return err
}

// CompletionCommand is the completion command: its one argument names the
// shell; --help says so.
func CompletionCommand(args []string, w io.Writer, prog string, commands []string) error {
	usage := "completion bash|zsh|fish: name the shell, e.g. source <(" + prog + " completion bash)"
	if len(args) == 1 && (args[0] == "-h" || args[0] == "--help") {
		_, err := fmt.Fprintln(w, "usage:", prog, usage)
		return err
	}
	if len(args) != 1 {
		return UsageErr("%s", usage)
	}
	if err := Completion(w, args[0], prog, commands); err != nil {
		return UsageErr("%v", err)
	}
	return nil
}
