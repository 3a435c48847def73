// Package cli is what the Leasehold programs share on the command line:
// flags settable from the environment, logging and signal handling.
package cli

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

// ParseFlags parses args into fs, taking each flag not given from the
// environment as LEASEHOLD_<NAME> (dashes become underscores).
func ParseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] || err != nil {
			return
		}
		name := "LEASEHOLD_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(name); ok {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("%s: %w", name, e)
			}
		}
	})
	return err
}
