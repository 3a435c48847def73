package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/auth"
	"github.com/leasehold/leasehold/role"
)

// userCmd manages the dashboard's users (SPEC "Roles and audit"): add,
// set-role, remove, list. A password given as "-" is read from stdin
// (its first line), so that it stays out of the process list and the
// shell's history.
func userCmd(ctx context.Context, pool *pgxpool.Pool, out io.Writer, stdin io.Reader, args []string) error {
	users := auth.New(pool, nil)
	if len(args) == 0 {
		return errors.New("usage: server user add|set-role|remove|list")
	}
	fs := flag.NewFlagSet("user "+args[0], flag.ContinueOnError)
	name := fs.String("name", "", "the user's name (1 to 64 letters, digits or _.@-)")
	var roleFlag, password *string
	switch args[0] {
	case "add":
		roleFlag = fs.String("role", "", "viewer, operator or admin")
		password = fs.String("password", "", `the password, 8 to 1024 characters; "-" reads it from stdin`)
	case "set-role":
		roleFlag = fs.String("role", "", "viewer, operator or admin")
	case "remove", "list":
	default:
		return fmt.Errorf("unknown user command %q: want add, set-role, remove or list", args[0])
	}
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("user %s: unexpected %q (flags only)", args[0], fs.Arg(0))
	}
	if args[0] != "list" && *name == "" {
		return fmt.Errorf("user %s: --name is required", args[0])
	}
	var r role.Role
	if roleFlag != nil {
		r = role.Role(*roleFlag)
		if !r.ForPerson() {
			return fmt.Errorf("--role %q: want viewer, operator or admin", *roleFlag)
		}
	}
	switch args[0] {
	case "add":
		pw := *password
		if pw == "-" {
			line, err := bufio.NewReader(io.LimitReader(stdin, 4096)).ReadString('\n')
			if err != nil && !errors.Is(err, io.EOF) {
				return fmt.Errorf("reading the password from stdin: %w", err)
			}
			pw = strings.TrimRight(line, "\r\n")
		}
		u, err := users.AddUser(ctx, *name, r, pw)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "added %s %q\n", u.Role, u.Username)
	case "set-role":
		if err := users.SetRole(ctx, *name, r); err != nil {
			return err
		}
		fmt.Fprintf(out, "%q is now %s\n", *name, r)
	case "remove":
		if err := users.RemoveUser(ctx, *name); err != nil {
			return err
		}
		fmt.Fprintf(out, "removed %q and ended its sessions\n", *name)
	case "list":
		list, err := users.Users(ctx)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tROLE\tCREATED\tLAST SIGN-IN")
		for _, u := range list {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", u.Username, u.Role, u.CreatedAt.Format(time.RFC3339), orDash(u.LastLoginAt))
		}
		return tw.Flush()
	}
	return nil
}
