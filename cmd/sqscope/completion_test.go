package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sqscope/sqscope/analyzer"
)

// completionCases are command lines (the last word being completed) and
// the completions every shell must offer for them.
var completionCases = []struct {
	line string
	want []string
}{
	{"sqscope rep", []string{"replay", "report"}},
	{"sqscope trace --mode ", []string{"events", "counters", "sentinel"}},
	{"sqscope trace --js", []string{"--json"}},
	{"sqscope workload --inl", []string{"--inline_size"}},
	{"sqscope export --format ", []string{"chrome", "perfetto"}},
	{"sqscope record --fail-on ", []string{"error", "warning", "prediction"}},
	{"sqscope diff --match ", []string{"process", "qpn"}},
	{"sqscope help exp", []string{"export"}},
}

// completionShell runs script in shell with the sqscope under test first
// on PATH, and returns its standard output.
func completionShell(t *testing.T, shell string, args ...string) string {
	t.Helper()
	if _, err := exec.LookPath(shell); err != nil {
		t.Fatalf("%s is needed (make deps installs it)", shell)
	}
	dir := t.TempDir()
	if err := os.Symlink(sqscopeBin(t), filepath.Join(dir, "sqscope")); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(shell, args...)
	cmd.Env = append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"))
	var errb strings.Builder
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", shell, err, errb.String())
	}
	return string(out)
}

// shellWords are the words of a command line, each quoted for a shell
// array, and how many there are (the last may be empty: the word being
// completed).
func shellWords(line string) (string, int) {
	words := strings.Split(line, " ")
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = "'" + w + "'"
	}
	return strings.Join(q, " "), len(words)
}

// checkCompletions compares what a shell offered for each case, a block
// of lines per case ended by "--", each line a completion (its first
// word, or what precedes a ':' of zsh's description).
func checkCompletions(t *testing.T, shell, out string) {
	t.Helper()
	blocks := strings.Split(out, "--\n")
	for i, tc := range completionCases {
		var got []string
		if i < len(blocks) {
			for _, l := range strings.Split(strings.TrimSpace(blocks[i]), "\n") {
				if l == "" {
					continue
				}
				w := strings.Fields(l)[0]
				if shell == "zsh" {
					w, _, _ = strings.Cut(l, ":")
				}
				got = append(got, w)
			}
		}
		slices.Sort(got) // fish sorts them
		if want := slices.Sorted(slices.Values(tc.want)); !slices.Equal(got, want) {
			t.Errorf("%s completes %q to %q, want %q", shell, tc.line, got, tc.want)
		}
	}
}

// The bash script (cobra's, on bash-completion) completes commands, flags
// and flag values by asking sqscope.
func TestBashCompletion(t *testing.T) {
	var prog strings.Builder
	prog.WriteString("source /usr/share/bash-completion/bash_completion\nsource <(sqscope completion bash)\n")
	for _, tc := range completionCases {
		words, n := shellWords(tc.line)
		prog.WriteString("COMP_WORDS=(" + words + "); COMP_CWORD=" + strconv.Itoa(n-1) +
			"; COMP_LINE='" + tc.line + "'; COMP_POINT=${#COMP_LINE}; COMP_TYPE=9; COMPREPLY=(); __start_sqscope 2>/dev/null; printf '%s\\n' \"${COMPREPLY[@]}\"; echo --\n")
	}
	checkCompletions(t, "bash", completionShell(t, "bash", "--norc", "--noprofile", "-c", prog.String()))
}

// The zsh script runs in zsh with compinit; _describe, which needs a
// completion widget, is replaced by one that prints what it was given.
func TestZshCompletion(t *testing.T) {
	var prog strings.Builder
	prog.WriteString("autoload -U compinit && compinit -u\nsource <(sqscope completion zsh)\n_describe() { print -rl -- \"${completions[@]}\" }\n")
	for _, tc := range completionCases {
		words, n := shellWords(tc.line)
		prog.WriteString("words=(" + words + "); CURRENT=" + strconv.Itoa(n) + "; _sqscope; echo --\n")
	}
	checkCompletions(t, "zsh", completionShell(t, "zsh", "-f", "-c", prog.String()))
}

// The fish script completes in fish itself.
func TestFishCompletion(t *testing.T) {
	var prog strings.Builder
	prog.WriteString("sqscope completion fish | source\n")
	for _, tc := range completionCases {
		prog.WriteString("complete -C '" + tc.line + "'; printf '%s\\n' --\n")
	}
	checkCompletions(t, "fish", completionShell(t, "fish", "--no-config", "-c", prog.String()))
}

// Every shell's script is written, and a shell it has none for is a
// usage error.
func TestCompletionScripts(t *testing.T) {
	bin := sqscopeBin(t)
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		out, err := exec.Command(bin, "completion", shell).Output()
		if err != nil || !strings.Contains(string(out), "__complete") {
			t.Errorf("completion %s: %v, a script that does not ask sqscope:\n%.300s", shell, err, out)
		}
	}
	cmd := exec.Command(bin, "completion", "tcsh")
	out, _ := cmd.CombinedOutput()
	if cmd.ProcessState.ExitCode() != 2 || !strings.Contains(string(out), "want bash, zsh, fish or powershell") {
		t.Errorf("completion tcsh: exit %d: %s", cmd.ProcessState.ExitCode(), out)
	}
}

// --trigger completes to every diagnosis kind the analyzer has, and the
// severities, as the flight recorder takes them.
func TestTriggerCompletion(t *testing.T) {
	var out, errb bytes.Buffer
	if err := run(context.Background(), []string{"__complete", "record", "--trigger", ""}, &out, &errb); err != nil {
		t.Fatal(err)
	}
	kinds, _ := analyzer.DiagKindNames()
	for _, want := range append([]string{"enomem", "signal", "diagnosis", "diagnosis=warning"}, kinds...) {
		if !strings.HasPrefix(want, "diagnosis") && slices.Contains(kinds, want) {
			want = "diagnosis=" + want
		}
		if !strings.Contains(out.String(), "\n"+want+"\t") && !strings.HasPrefix(out.String(), want+"\t") {
			t.Errorf("--trigger does not complete to %s:\n%s", want, out.String())
		}
	}
}
