// Package cli is what the Leasehold programs share on the command line:
// flags settable from the environment, logging and signal handling.
package cli

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// ParseFlags parses args into fs, taking each flag not given from the
// environment as LEASEHOLD_<NAME> (dashes become underscores).
//
// Asked for help (-h, -help, --help), it prints fs.Usage to stdout and
// returns flag.ErrHelp, which the caller treats as success: help is an
// answer, not a failure. Any other parse error goes to stderr as usual.
func ParseFlags(fs *flag.FlagSet, args []string) error {
	return parseFlags(fs, args, os.Stdout, os.Stderr)
}

func parseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) error {
	var out bytes.Buffer
	fs.SetOutput(&out)
	err := fs.Parse(args)
	fs.SetOutput(stderr)
	if errors.Is(err, flag.ErrHelp) {
		_, _ = stdout.Write(out.Bytes())
		return flag.ErrHelp
	}
	_, _ = stderr.Write(out.Bytes())
	if err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] || err != nil {
			return
		}
		name := "LEASEHOLD_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(name); ok {
			if e := fs.Set(f.Name, v); e != nil {
				// The variable and the value: the flag package's own
				// message ("parse error") names neither.
				err = fmt.Errorf("%s=%q: invalid value for -%s: %w", name, v, f.Name, e)
			}
		}
	})
	return err
}
