package cli

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// helpWidth is the width flag descriptions are wrapped to in --help.
const helpWidth = 100

// Command is one sqscope command: usage is its usage line (after
// "sqscope "), about what it does, examples the end of its --help (help
// goes to standard output, as users page it). A bad flag is a usage error
// (exit status 2) naming the command and the flag; flags and arguments
// may come in any order, and everything after "--" is an argument.
func Command(name, summary, usage, about, examples string) *cobra.Command {
	c := &cobra.Command{Use: name, Short: summary, Long: about, Example: examples,
		SilenceErrors: true, SilenceUsage: true, DisableFlagsInUseLine: true}
	c.Flags().SortFlags = true
	c.SetHelpFunc(func(c *cobra.Command, _ []string) {
		w := c.OutOrStdout()
		fmt.Fprintf(w, "usage: sqscope %s\n\n%s\n\nFLAGS\n", usage, about)
		io.WriteString(w, c.LocalFlags().FlagUsagesWrapped(helpWidth))
		io.WriteString(w, examples)
	})
	c.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return UsageErr("%s: %v", name, FlagError(err))
	})
	return c
}

// FlagError says what is wrong with a flag in one line that names it as
// help lists it: the value given and what the flag wants, without
// strconv's or pflag's wording.
func FlagError(err error) error {
	var iv *pflag.InvalidValueError
	var vr *pflag.ValueRequiredError
	switch {
	case errors.As(err, &vr):
		f := vr.GetFlag()
		placeholder, _ := pflag.UnquoteUsage(f)
		return fmt.Errorf("%s needs a value (%s)", flagNames(f), placeholder)
	case !errors.As(err, &iv):
		return err
	}
	f := iv.GetFlag()
	name := flagNames(f)
	cause := errors.Unwrap(iv)
	var ne *strconv.NumError
	if errors.As(cause, &ne) {
		cause = numWant(f.Value.Type(), ne)
	}
	return fmt.Errorf("invalid value %q for %s: %v", iv.GetValue(), name, cause)
}

// flagNames is a flag's names as help lists them: -p/--pid.
func flagNames(f *pflag.Flag) string {
	if f.Shorthand != "" {
		return "-" + f.Shorthand + "/--" + f.Name
	}
	return "--" + f.Name
}

// numWant is what a number flag wants, said in words.
func numWant(typ string, ne *strconv.NumError) error {
	if errors.Is(ne.Err, strconv.ErrRange) {
		return errors.New("out of range")
	}
	switch {
	case strings.HasPrefix(typ, "uint"):
		return errors.New("want a non-negative integer")
	case strings.HasPrefix(typ, "int"):
		return errors.New("want an integer")
	}
	return errors.New("want a number")
}

// Values makes flag name of c complete to the values given, each
// "VALUE\tdescription" or a bare value; no file names are offered.
func Values(c *cobra.Command, name string, values ...string) {
	comps := make([]cobra.Completion, len(values))
	for i, v := range values {
		comps[i] = cobra.Completion(v)
	}
	must(c.RegisterFlagCompletionFunc(name, cobra.FixedCompletions(comps, cobra.ShellCompDirectiveNoFileComp)))
}

// must panics on an error in how the commands are put together, which
// any run of their tests shows.
func must(err error) {
	if err != nil {
		panic(err)
	}
}

// Aliases makes the flag names in alias (alias → name) another spelling
// of their flag: perftest's names beside sqscope's, not listed in help.
func Aliases(fs *pflag.FlagSet, alias map[string]string) {
	fs.SetNormalizeFunc(func(_ *pflag.FlagSet, name string) pflag.NormalizedName {
		if n, ok := alias[name]; ok {
			return pflag.NormalizedName(n)
		}
		return pflag.NormalizedName(name)
	})
}
