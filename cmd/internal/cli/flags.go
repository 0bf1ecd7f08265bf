package cli

import (
	"flag"
	"fmt"
	"io"
	"reflect"
	"strings"
)

// PrintFlags lists a FlagSet's flags the GNU way: the names of one flag
// together (a one-letter name as -s, a longer one as --size), its value's
// name, what it does and its default, once.
func PrintFlags(w io.Writer, fs *flag.FlagSet) {
	type entry struct {
		names []string
		value string
		usage string
		def   string
	}
	var entries []*entry
	byUsage := map[string]*entry{}
	fs.VisitAll(func(f *flag.Flag) {
		value, usage := flag.UnquoteUsage(f)
		if _, ok := f.Value.(*uint32Flag); ok {
			value = "N"
		}
		name := "--" + f.Name
		if len(f.Name) == 1 {
			name = "-" + f.Name
		}
		// names registered for one value share their usage text
		key := usage + "\x00" + reflect.TypeOf(f.Value).String()
		if e := byUsage[key]; e != nil {
			if len(f.Name) == 1 {
				e.names = append([]string{name}, e.names...)
			} else {
				e.names = append(e.names, name)
			}
			return
		}
		e := &entry{names: []string{name}, value: value, usage: usage}
		if !isZeroDefault(f) {
			e.def = f.DefValue
			if _, ok := f.Value.(interface{ IsBoolFlag() bool }); !ok && value == "string" {
				e.def = fmt.Sprintf("%q", f.DefValue)
			}
		}
		byUsage[key] = e
		entries = append(entries, e)
	})
	for _, e := range entries {
		line := "  " + strings.Join(e.names, ", ")
		if e.value != "" {
			line += " " + e.value
		}
		fmt.Fprintln(w, line)
		usage := strings.ReplaceAll(e.usage, "\n", "\n    \t")
		if e.def != "" && !strings.Contains(e.usage, "(default ") {
			usage += fmt.Sprintf(" (default %s)", e.def)
		}
		fmt.Fprintf(w, "    \t%s\n", usage)
	}
}

// isZeroDefault says whether a flag's default is its type's zero value,
// which the listing leaves out.
func isZeroDefault(f *flag.Flag) bool {
	switch f.DefValue {
	case "", "0", "false", "0s", "[]", "<nil>":
		return true
	}
	return false
}
