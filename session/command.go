package session

import (
	"errors"
	"fmt"
	"strings"
)

// SplitCommand splits a command line like a shell would for plain words,
// single and double quotes and backslash escapes (no expansion).
func SplitCommand(s string) ([]string, error) {
	var out []string
	var cur strings.Builder
	inWord, quote := false, rune(0)
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		c := rs[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			} else if c == '\\' && quote == '"' && i+1 < len(rs) {
				i++
				cur.WriteRune(rs[i])
			} else {
				cur.WriteRune(c)
			}
		case c == '\'' || c == '"':
			quote, inWord = c, true
		case c == '\\' && i+1 < len(rs):
			i++
			cur.WriteRune(rs[i])
			inWord = true
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(c)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unterminated %c quote in %q", quote, s)
	}
	if inWord {
		out = append(out, cur.String())
	}
	if len(out) == 0 {
		return nil, errors.New("-c: empty command")
	}
	return out, nil
}

// SplitAssignments takes the VAR=value words that start argv, as a shell
// does for a command's environment, and returns them and the command.
func SplitAssignments(argv []string) (env, cmd []string, err error) {
	i := 0
	for ; i < len(argv) && isAssignment(argv[i]); i++ {
	}
	if i == len(argv) {
		return nil, nil, fmt.Errorf("%q: only variable assignments, no command to run", strings.Join(argv, " "))
	}
	return argv[:i], argv[i:], nil
}

// isAssignment reports whether w is NAME=value with NAME a shell name.
func isAssignment(w string) bool {
	name, _, ok := strings.Cut(w, "=")
	if !ok || name == "" {
		return false
	}
	for i, c := range name {
		switch {
		case c == '_', c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// ParseCommand is the command to start: the command line line (-c), or
// else argv as given (-- CMD ARGS); in both, VAR=value words before the
// command are its environment's. target names it.
func ParseCommand(line string, argv []string) (env, cmd []string, target string, err error) {
	target = strings.Join(argv, " ")
	if line != "" {
		if argv, err = SplitCommand(line); err != nil {
			return nil, nil, "", err
		}
		target = line
	}
	env, cmd, err = SplitAssignments(argv)
	return env, cmd, target, err
}
