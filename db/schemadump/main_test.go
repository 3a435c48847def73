package main

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"
)

func TestNormalize(t *testing.T) {
	t.Parallel()
	dump := `--
-- PostgreSQL database dump
--

\restrict AbC123

-- Dumped from database version 15.20 (Debian 15.20-0+deb12u1)
-- Dumped by pg_dump version 15.20 (Debian 15.20-0+deb12u1)

SET statement_timeout = 0;
SELECT pg_catalog.set_config('search_path', '', false);
SET default_table_access_method = heap;

--
-- Name: t; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.t (
    id bigint
);   

--
-- PostgreSQL database dump complete
--

\unrestrict AbC123

`
	want := `--
-- Name: t; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.t (
    id bigint
);
`
	var got bytes.Buffer
	if err := normalize(&got, strings.NewReader(dump)); err != nil {
		t.Fatal(err)
	}
	if got.String() != want {
		t.Errorf("normalize:\n%s\nwant:\n%s", got.String(), want)
	}
}

func TestFindPgDumpRefusesAnotherMajor(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("pg_dump"); err != nil {
		t.Skip("no pg_dump on PATH")
	}
	_, err := findPgDump(context.Background(), 99)
	if err == nil || !strings.Contains(err.Error(), "the server is PostgreSQL 99 but") {
		t.Fatalf("findPgDump(99) = %v, want an error naming both versions", err)
	}
}

func TestWithDatabase(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"postgres://u@h:5432/postgres?sslmode=disable": "postgres://u@h:5432/x?sslmode=disable",
		"host=/tmp/s port=5432 user=u dbname=postgres": "host=/tmp/s port=5432 user=u dbname=postgres dbname=x",
	} {
		if got := withDatabase(in, "x"); got != want {
			t.Errorf("withDatabase(%q) = %q, want %q", in, got, want)
		}
	}
}
