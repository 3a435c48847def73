package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/apitoken"
	"github.com/leasehold/leasehold/queue"
)

func tokenCmd(ctx context.Context, pool *pgxpool.Pool, out io.Writer, args []string) error {
	store := apitoken.NewStore(pool)
	if len(args) == 0 {
		return errors.New("usage: server token create|list|revoke")
	}
	switch args[0] {
	case "create":
		fs := flag.NewFlagSet("token create", flag.ContinueOnError)
		role := fs.String("role", "", "admin, operator, viewer or worker")
		name := fs.String("name", "", "the token's name (a worker's identity)")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if !apitoken.Role(*role).Valid() {
			return fmt.Errorf("--role %q: want admin, operator, viewer or worker", *role)
		}
		secret, tok, err := store.Create(ctx, *name, apitoken.Role(*role))
		if err != nil {
			return err
		}
		// The token alone on the last line: `| tail -1` takes it.
		fmt.Fprintf(out, "created %s token %q; it is shown this once and stored only as a hash:\n", tok.Role, tok.Name)
		fmt.Fprintln(out, secret)
		return nil
	case "list":
		toks, err := store.List(ctx)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tROLE\tCREATED\tLAST USED\tREVOKED")
		for _, t := range toks {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", t.Name, t.Role, t.CreatedAt.Format(time.RFC3339), orDash(t.LastUsedAt), orDash(t.RevokedAt))
		}
		return tw.Flush()
	case "revoke":
		if len(args) != 2 {
			return errors.New("usage: server token revoke NAME")
		}
		return revokeToken(ctx, pool, out, store, args[1])
	default:
		return fmt.Errorf("unknown token command %q: want create, list or revoke", args[0])
	}
}

// revokeToken revokes a token; for a worker token it also ends the leases
// the worker holds, so that its jobs are taken back and retried now
// instead of when their leases would have run out. A token revoked
// already is reported as such, and its leases are ended all the same, so
// that running it again finishes a revoke that was cut short.
func revokeToken(ctx context.Context, pool *pgxpool.Pool, out io.Writer, store *apitoken.Store, name string) error {
	tok, already, err := store.Revoke(ctx, name)
	if err != nil {
		return err
	}
	if already {
		fmt.Fprintf(out, "%q was already revoked (at %s)\n", name, tok.RevokedAt.Format(time.RFC3339))
	} else {
		fmt.Fprintf(out, "revoked %q\n", name)
	}
	if tok.Role != apitoken.RoleWorker {
		return nil
	}
	// After the revoke, in a statement of its own: it sees every job a
	// claim in flight took (store.Revoke waited for those claims).
	ended, err := queue.NewClient(pool, nil).EndLeasesOf(ctx, name)
	if err != nil {
		return fmt.Errorf("the token is revoked, but its running leases run until their deadlines (run the revoke again): %w", err)
	}
	if len(ended) > 0 {
		fmt.Fprintf(out, "ended %d running lease(s) of %q; jobs %v are taken back and retried\n", len(ended), name, ended)
	}
	return nil
}

func orDash(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.Format(time.RFC3339)
}
