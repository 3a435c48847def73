// Package migrations holds the SQL schema of Leasehold as golang-migrate
// files, embedded so that the server binary can migrate on its own.
package migrations

import "embed"

// FS holds every *.up.sql and *.down.sql file of this folder.
//
//go:embed *.sql
var FS embed.FS
