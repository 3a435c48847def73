// Package migrations holds the SQL schema of Leasehold as golang-migrate
// files, embedded so that the server binary can migrate on its own.
package migrations

import (
	"embed"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
)

// FS holds every *.up.sql and *.down.sql file of this folder.
//
//go:embed *.sql
var FS embed.FS

// Latest is the version of the newest migration in FS: the schema version
// this build expects.
func Latest() uint {
	names, err := fs.Glob(FS, "*.up.sql")
	if err != nil {
		panic(err) // a fixed pattern over an embedded folder cannot fail
	}
	var latest uint
	for _, name := range names {
		digits, _, _ := strings.Cut(name, "_")
		v, err := strconv.ParseUint(digits, 10, 32)
		if err != nil {
			panic(fmt.Sprintf("migration %s: the name must start with its version number", name))
		}
		latest = max(latest, uint(v))
	}
	return latest
}
